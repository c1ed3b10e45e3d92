package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// clockTicks is USER_HZ, the unit of utime and stime in /proc/<pid>/stat.
// It is 100 on every Linux architecture Go supports.
const clockTicks = 100

// procs are the server's processes (kplane, and etcd in etcd mode);
// empty when the bench cannot see them. Their figures are summed.
type procs []int

// cpuSeconds is the user plus system CPU time the processes have used.
func (p procs) cpuSeconds() (float64, error) {
	var total float64
	for _, pid := range p {
		s, err := cpuOf(pid)
		if err != nil {
			return 0, err
		}
		total += s
	}
	return total, nil
}

// rss is the processes' resident set in bytes (VmRSS).
func (p procs) rss() (int64, error) {
	var total int64
	for _, pid := range p {
		b, err := rssOf(pid)
		if err != nil {
			return 0, err
		}
		total += b
	}
	return total, nil
}

// cpuOf reads utime+stime from /proc/<pid>/stat.
func cpuOf(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	return parseStatCPU(b)
}

// parseStatCPU parses a /proc/<pid>/stat line. The command name (field 2)
// is in parentheses and may hold spaces and parentheses, so the fields
// are counted from the last ')': state is field 3, utime 14, stime 15.
func parseStatCPU(b []byte) (float64, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("malformed stat line")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0, fmt.Errorf("stat line has %d fields after the name, want ≥ 13", len(f))
	}
	utime, err1 := strconv.ParseUint(f[11], 10, 64)
	stime, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("malformed utime/stime %q %q", f[11], f[12])
	}
	return float64(utime+stime) / clockTicks, nil
}

// rssOf reads VmRSS from /proc/<pid>/status.
func rssOf(pid int) (int64, error) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, err
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
			// "VmRSS:	   12345 kB"
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0, fmt.Errorf("VmRSS %q: %v", v, err)
			}
			return kb << 10, nil
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	return 0, fmt.Errorf("no VmRSS in /proc/%d/status", pid)
}

// machineTicks are the bench machine's CPU times, all cores together, in
// clock ticks: idle (idle plus iowait) and total.
type machineTicks struct{ idle, total uint64 }

// readMachineTicks reads the machine's CPU times from /proc/stat.
func readMachineTicks() (machineTicks, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return machineTicks{}, err
	}
	return parseMachineTicks(b)
}

// parseMachineTicks parses the first line of /proc/stat, "cpu" and then
// user, nice, system, idle, iowait, irq, softirq and steal ticks (guest
// time, after them, is counted in user already).
func parseMachineTicks(b []byte) (machineTicks, error) {
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := strings.Fields(string(line))
	if len(f) < 9 || f[0] != "cpu" {
		return machineTicks{}, fmt.Errorf("/proc/stat: not a cpu line: %q", line)
	}
	var t machineTicks
	for i, s := range f[1:9] {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return machineTicks{}, fmt.Errorf("/proc/stat: field %d %q: %v", i+1, s, err)
		}
		t.total += v
		if i == 3 || i == 4 { // idle, iowait
			t.idle += v
		}
	}
	return t, nil
}

// idlePercentSince is the share of the machine's CPU time left idle since
// t0; false when no time has passed.
func (t machineTicks) idlePercentSince(t0 machineTicks) (float64, bool) {
	if t.total <= t0.total || t.idle < t0.idle {
		return 0, false
	}
	return 100 * float64(t.idle-t0.idle) / float64(t.total-t0.total), true
}

// selfCPUSeconds is this process's user plus system CPU time.
func selfCPUSeconds() float64 {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano()).Seconds()
}
