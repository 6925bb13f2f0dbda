package main

import (
	"fmt"
	"log/slog"
	"os"
)

// pebbleLogger routes Pebble's messages into the JSON log: its chatter at
// debug, its errors at error. A storage fault (the store then refuses
// writes and keeps serving reads) is logged at error; the store hands on to
// Fatalf only a fatal error no fault explains, a fault in Pebble itself.
type pebbleLogger struct{ log *slog.Logger }

func (l pebbleLogger) Infof(format string, args ...any) {
	l.log.Debug(fmt.Sprintf(format, args...), "component", "pebble")
}

func (l pebbleLogger) Errorf(format string, args ...any) {
	l.log.Error(fmt.Sprintf(format, args...), "component", "pebble")
}

func (l pebbleLogger) Fatalf(format string, args ...any) {
	l.log.Error(fmt.Sprintf(format, args...), "component", "pebble", "fatal", true)
	os.Exit(1)
}
