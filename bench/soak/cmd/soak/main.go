// Command soak runs `clearance serve` under a steady mixed load for a
// duration and judges whether it leaks (package soak has the details):
//
//	go build -o /path/clearance ./cmd/clearance      # from the repository root
//	cd bench/soak && go run ./cmd/soak -bin /path/clearance -duration 1h -interval 1m -out soak-out
//
// It prints a line per sample, then the verdict and where the CSV and the
// PNG are, and exits 0 when the run was flat with no errors, 1 when it was
// not, 2 when it could not run. -judge FILE judges and plots a CSV of an
// earlier run again (with the tolerance flags given) instead of running.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/clearancehq/clearance/bench/soak"
)

func main() { os.Exit(run(os.Args[1:], os.Stdout, os.Stderr)) }

func run(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("soak", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var cfg soak.Config
	rule := soak.DefaultRule
	fs.StringVar(&cfg.Binary, "bin", "", "the clearance binary (required to run)")
	fs.StringVar(&cfg.Dir, "out", "soak-out", "output directory: soak.csv, soak.png, verdict.txt, logs")
	fs.StringVar(&cfg.Store, "store", "", "the server's --store: empty for embedded Pebble, or a postgres:// URL of a scratch database or schema")
	fs.DurationVar(&cfg.Duration, "duration", time.Hour, "how long to load")
	fs.DurationVar(&cfg.Interval, "interval", soak.DefaultInterval, "time between samples")
	fs.Float64Var(&cfg.Rate, "rate", soak.DefaultRate, "the load tool's operations per second")
	fs.IntVar(&cfg.Concurrency, "concurrency", soak.DefaultConcurrency, "the load tool's workers")
	fs.Float64Var(&cfg.CycleShare, "cycle-share", soak.DefaultCycleShare, "share of full agent cycles among the load tool's operations")
	fs.DurationVar(&cfg.FeatureEvery, "feature-every", soak.DefaultFeatureEvery, "time between the harness's feature rounds")
	fs.DurationVar(&cfg.ExportEvery, "export-every", soak.DefaultExportEvery, "time between validation-pack exports")
	fs.DurationVar(&rule.Warmup, "warmup", 0, "left out of the verdict; 0 means an eighth of the run")
	fs.Float64Var(&rule.Memory, "memory", rule.Memory, "relative growth allowed to RSS and heap in use (last quarter's mean against the second's)")
	fs.Float64Var(&rule.Count, "count", rule.Count, "relative growth allowed to goroutines and open FDs")
	fs.Float64Var(&rule.CountSlack, "count-slack", rule.CountSlack, "absolute growth allowed to goroutines and open FDs on top of -count")
	fs.Float64Var(&rule.P99, "p99", rule.P99, "factor allowed between the last and the second quarter's median p99")
	dataDir := fs.String("data", "", "the server's data directory; empty means a temporary one, removed at the end")
	judge := fs.String("judge", "", "judge and plot this CSV of an earlier run instead of running (writes the PNG beside it)")
	var serverArgs string
	fs.StringVar(&serverArgs, "server-args", "", "more flags for clearance serve, separated by spaces")
	if err := fs.Parse(args); err != nil {
		if err == flag.ErrHelp {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "soak: unexpected argument %q\n", fs.Arg(0))
		return 2
	}
	cfg.Rule = rule
	if *judge != "" {
		return rejudge(*judge, rule, stdout, stderr)
	}
	if cfg.Binary == "" {
		fmt.Fprintln(stderr, "soak: -bin is required (go build -o clearance ./cmd/clearance at the repository root)")
		return 2
	}
	cfg.ServerArgs = strings.Fields(serverArgs)
	cfg.Log = stderr
	cfg.DataDir = *dataDir
	if cfg.DataDir == "" {
		d, err := os.MkdirTemp("", "clearance-soak-data-")
		if err != nil {
			fmt.Fprintf(stderr, "soak: %v\n", err)
			return 2
		}
		defer os.RemoveAll(d)
		cfg.DataDir = d
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	rep, err := soak.Run(ctx, cfg)
	if err != nil {
		fmt.Fprintf(stderr, "soak: %v\n", err)
		return 2
	}
	text, err := os.ReadFile(rep.Text)
	if err != nil {
		fmt.Fprintf(stderr, "soak: %v\n", err)
		return 2
	}
	fmt.Fprint(stdout, string(text))
	fmt.Fprintf(stdout, "CSV: %s\nPNG: %s\nverdict: %s\n", abs(rep.CSV), abs(rep.PNG), abs(rep.Text))
	if !rep.Verdict.Pass {
		return 1
	}
	return 0
}

// rejudge judges a CSV again and writes its plot beside it.
func rejudge(path string, rule soak.Rule, stdout, stderr io.Writer) int {
	f, err := os.Open(path)
	if err != nil {
		fmt.Fprintf(stderr, "soak: %v\n", err)
		return 2
	}
	samples, err := soak.ReadCSV(f)
	f.Close()
	if err != nil {
		fmt.Fprintf(stderr, "soak: %s: %v\n", path, err)
		return 2
	}
	v := soak.Judge(samples, rule)
	png := strings.TrimSuffix(path, filepath.Ext(path)) + ".png"
	out, err := os.Create(png)
	if err != nil {
		fmt.Fprintf(stderr, "soak: %v\n", err)
		return 2
	}
	if err := soak.Plot(out, samples, v); err != nil {
		out.Close()
		fmt.Fprintf(stderr, "soak: %v\n", err)
		return 2
	}
	if err := out.Close(); err != nil {
		fmt.Fprintf(stderr, "soak: %v\n", err)
		return 2
	}
	fmt.Fprint(stdout, v.String())
	fmt.Fprintf(stdout, "PNG: %s\n", abs(png))
	if !v.Pass {
		return 1
	}
	return 0
}

func abs(p string) string {
	if a, err := filepath.Abs(p); err == nil {
		return a
	}
	return p
}
