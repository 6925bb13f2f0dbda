package strictjson

import (
	"bytes"
	"errors"
	"io"
)

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

func isEOF(err error) bool { return errors.Is(err, io.EOF) }
