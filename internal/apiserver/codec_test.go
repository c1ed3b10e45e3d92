package apiserver

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

// readBody reads the whole body whatever its announced length says, and
// passes read errors on.
func TestReadBody(t *testing.T) {
	const body = "0123456789"
	for _, announced := range []int64{-1, 0, 3, 9, 10, 11, 100, 1 << 20} {
		for _, half := range []bool{false, true} {
			var rd io.Reader = strings.NewReader(body)
			if half {
				rd = iotest.HalfReader(rd)
			}
			got, err := readBody(rd, announced, 1<<20)
			if err != nil || string(got) != body {
				t.Errorf("announced %d (half reads %v): %q, %v", announced, half, got, err)
			}
		}
	}
	boom := errors.New("boom")
	if _, err := readBody(io.MultiReader(bytes.NewReader([]byte("01")), iotest.ErrReader(boom)), 10, 1<<20); !errors.Is(err, boom) {
		t.Errorf("read error: got %v", err)
	}
	if _, err := readBody(io.MultiReader(bytes.NewReader([]byte("01")), iotest.ErrReader(boom)), -1, 1<<20); !errors.Is(err, boom) {
		t.Errorf("read error, no length: got %v", err)
	}
}
