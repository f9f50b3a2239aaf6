package yardstick

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"time"
)

// procSample is a process's CPU time and resident memory, from /proc.
type procSample struct {
	CPU time.Duration
	RSS int64 // bytes
}

func readProc(pid int) (procSample, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return procSample{}, err
	}
	cpu, err := parseStatCPU(stat)
	if err != nil {
		return procSample{}, err
	}
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return procSample{}, err
	}
	rss, err := parseStatusRSS(status)
	return procSample{CPU: cpu, RSS: rss}, err
}

// parseStatCPU returns utime+stime from the contents of /proc/PID/stat.
// The command name, field 2, is in parentheses and may hold anything, so
// the fields are counted from the last closing parenthesis.
func parseStatCPU(b []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, fmt.Errorf("proc stat: no command name")
	}
	f := bytes.Fields(b[i+1:])
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("proc stat: %d fields after the name", len(f))
	}
	ut, err1 := strconv.ParseUint(string(f[11]), 10, 63)
	st, err2 := strconv.ParseUint(string(f[12]), 10, 63)
	// Ticks of 10 ms: a sum over 2^37 of them would overflow a Duration.
	if err1 != nil || err2 != nil || ut > 1<<36 || st > 1<<36 {
		return 0, fmt.Errorf("proc stat: bad utime or stime")
	}
	const userHZ = 100 // USER_HZ on Linux
	return time.Duration(ut+st) * (time.Second / userHZ), nil
}

// parseStatusRSS returns VmRSS from the contents of /proc/PID/status.
func parseStatusRSS(b []byte) (int64, error) {
	for line := range bytes.Lines(b) {
		v, ok := bytes.CutPrefix(line, []byte("VmRSS:"))
		if !ok {
			continue
		}
		v = bytes.TrimSpace(bytes.TrimSuffix(bytes.TrimSpace(v), []byte("kB")))
		kb, err := strconv.ParseInt(string(v), 10, 64)
		if err != nil || kb < 0 || kb > 1<<40 {
			return 0, fmt.Errorf("proc status: bad VmRSS %q", v)
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("proc status: no VmRSS")
}
