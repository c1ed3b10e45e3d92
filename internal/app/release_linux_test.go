package app

import (
	"bytes"
	"os"
	"strconv"
	"strings"
	"testing"
)

const smapsSample = `00400000-01475000 r-xp 00000000 fe:00 10018865                           /opt/my kplane
Size:              16852 kB
Rss:               12564 kB
Anonymous:             0 kB
VmFlags: rd ex mr mw me 
01475000-026af000 r--p 01075000 fe:00 10018865                           /opt/my kplane
Rss:               14432 kB
Anonymous:             0 kB
026af000-0274e000 rw-p 022af000 fe:00 10018865                           /opt/my kplane
Rss:                 632 kB
Anonymous:           164 kB
0274e000-02750000 r--p 0234e000 fe:00 10018865                           /opt/my kplane
Rss:                   8 kB
Anonymous:             8 kB
0274e000-047a9000 rw-p 00000000 00:00 0 
Rss:                 260 kB
Anonymous:           260 kB
7fadf93a0000-7fadf93c6000 r--p 00000000 fe:00 326269                     /usr/lib/x86_64-linux-gnu/libc.so.6
Rss:                 152 kB
Anonymous:             0 kB
7fadf93c6000-7fadf951c000 r-xp 00026000 fe:00 326269                     /opt/my kplane (deleted)
Rss:                 808 kB
Anonymous:             0 kB
`

// Only the read-only private mappings of the executable without private
// pages are released: not the data segment, not a relocated (RELRO)
// range, not another file.
func TestCleanMappings(t *testing.T) {
	got := cleanMappings(strings.NewReader(smapsSample), "/opt/my kplane")
	want := []mapping{{0x400000, 0x1475000}, {0x1475000, 0x26af000}}
	if len(got) != len(want) {
		t.Fatalf("cleanMappings = %x, want %x", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("cleanMappings = %x, want %x", got, want)
		}
	}
}

// After releaseStartupPages the test binary's read-only mappings hold
// fewer resident pages (and the test goes on running: what it needs
// faults back in).
func TestReleaseStartupPages(t *testing.T) {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		t.Skip(err)
	}
	before := exeRss(t, exe)
	releaseStartupPages()
	after := exeRss(t, exe)
	t.Logf("resident read-only pages of %s: %d kB before, %d kB after", exe, before, after)
	if after >= before {
		t.Errorf("resident read-only pages of the executable: %d kB before, %d kB after", before, after)
	}
}

// exeRss sums the Rss of the executable's read-only mappings.
func exeRss(t *testing.T, exe string) int {
	t.Helper()
	smaps, err := os.ReadFile("/proc/self/smaps")
	if err != nil {
		t.Skip(err)
	}
	total, in := 0, false
	for line := range bytes.Lines(smaps) {
		f := bytes.Fields(line)
		if len(f) == 0 {
			continue
		}
		if _, ok := addressRange(f[0]); ok {
			in = len(f[1]) == 4 && f[1][1] == '-' && string(mappedPath(bytes.TrimRight(line, "\n"))) == exe
			continue
		}
		if in && string(f[0]) == "Rss:" {
			n, _ := strconv.Atoi(string(f[1]))
			total += n
		}
	}
	return total
}
