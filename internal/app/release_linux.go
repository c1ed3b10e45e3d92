package app

import (
	"bufio"
	"bytes"
	"io"
	"os"
	"strconv"
	"syscall"
)

// releaseStartupPages unmaps the pages of kplane's own executable that
// start-up touched, once the server is ready, so that its resident set is
// what it keeps using rather than everything package initialisation ran.
//
// Go runs the init of every linked package before main (k8s.io/api's
// schemes, protobuf and gRPC registries, cel-go, the etcd client, ...),
// and the runtime walks every itab's types at start; each first touch of
// a page of the binary maps the aligned 64 KiB around it (the kernel's
// fault-around) or the whole page-cache folio. That leaves about 25 MB of
// the 52 MB binary mapped, of which an idle server uses a few hundred
// kilobytes. MADV_DONTNEED drops those mappings; the pages stay in the
// page cache (shared, clean, reclaimable) and whatever the server runs
// next faults back in: a minor fault, or a read if the kernel has evicted
// the page meanwhile.
//
// Only read-only private mappings of the executable that hold no private
// (copy-on-write) page are released: their contents are the file's, so
// dropping them loses nothing. Mappings that a dynamic linker relocated
// (RELRO) or the writable data segment are left alone. Errors are
// ignored: this only changes what is resident, never what the process
// computes.
func releaseStartupPages() {
	exe, err := os.Readlink("/proc/self/exe")
	if err != nil {
		return
	}
	smaps, err := os.Open("/proc/self/smaps")
	if err != nil {
		return
	}
	clean := cleanMappings(smaps, exe)
	smaps.Close()
	for _, m := range clean {
		syscall.Syscall(syscall.SYS_MADVISE, m.start, m.end-m.start, syscall.MADV_DONTNEED)
	}
}

type mapping struct{ start, end uintptr }

// cleanMappings returns the mappings of file path in smaps (in the form
// of /proc/<pid>/smaps) that are private, not writable and hold no
// anonymous page.
func cleanMappings(smaps io.Reader, path string) []mapping {
	var out []mapping
	var cur mapping
	candidate := false
	sc := bufio.NewScanner(smaps)
	for sc.Scan() {
		line := sc.Bytes()
		fields := bytes.Fields(line)
		if len(fields) == 0 {
			continue
		}
		if rng, ok := addressRange(fields[0]); ok {
			// A mapping's header: start-end perms offset dev inode [path].
			cur = rng
			perms := fields[1]
			candidate = len(fields) >= 6 && len(perms) == 4 && perms[1] == '-' && perms[3] == 'p' &&
				string(mappedPath(line)) == path
			continue
		}
		if candidate && string(fields[0]) == "Anonymous:" && len(fields) >= 2 {
			if string(fields[1]) == "0" {
				out = append(out, cur)
			}
			candidate = false
		}
	}
	return out
}

// addressRange parses "start-end" in hexadecimal.
func addressRange(b []byte) (mapping, bool) {
	i := bytes.IndexByte(b, '-')
	if i <= 0 {
		return mapping{}, false
	}
	start, err1 := strconv.ParseUint(string(b[:i]), 16, 64)
	end, err2 := strconv.ParseUint(string(b[i+1:]), 16, 64)
	if err1 != nil || err2 != nil || end <= start {
		return mapping{}, false
	}
	return mapping{uintptr(start), uintptr(end)}, true
}

// mappedPath is the path at the end of a mapping's header line, after its
// five fixed fields; it may hold spaces.
func mappedPath(header []byte) []byte {
	rest := header
	for range 5 {
		rest = bytes.TrimLeft(rest, " ")
		i := bytes.IndexByte(rest, ' ')
		if i < 0 {
			return nil
		}
		rest = rest[i:]
	}
	return bytes.TrimSpace(rest)
}
