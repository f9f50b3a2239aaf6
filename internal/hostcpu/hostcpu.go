// Package hostcpu reads how busy the machine is from /proc/stat, to say
// how far a benchmark's figures can be trusted: on a virtual machine,
// steal is the time the hypervisor gave the CPUs to other guests, which
// shows up in every latency as noise that no process here can remove.
package hostcpu

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
)

// Sample is the machine's CPU time so far, in clock ticks.
type Sample struct {
	Total, Idle, Steal uint64
}

// Read samples /proc/stat; an error where it does not exist (not Linux).
func Read() (Sample, error) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return Sample{}, err
	}
	return Parse(b)
}

// Parse reads the aggregate "cpu" line of /proc/stat: user, nice, system,
// idle, iowait, irq, softirq, steal, then guest times that user already
// counts. Kernels before 2.6.11 have no steal field, read as 0.
func Parse(b []byte) (Sample, error) {
	line, _, _ := bytes.Cut(b, []byte("\n"))
	f := bytes.Fields(line)
	if len(f) < 5 || string(f[0]) != "cpu" {
		return Sample{}, errors.New("/proc/stat: no cpu line first")
	}
	var s Sample
	for i, v := range f[1:min(len(f), 9)] {
		n, err := strconv.ParseUint(string(v), 10, 63)
		if err != nil || n > 1<<56 {
			return Sample{}, fmt.Errorf("/proc/stat: bad cpu field %q", v)
		}
		s.Total += n
		switch i {
		case 3, 4: // idle, iowait
			s.Idle += n
		case 7:
			s.Steal = n
		}
	}
	return s, nil
}

// Usage is what the machine did between two samples, as shares of all
// its CPU time in that interval.
type Usage struct {
	Steal float64 `json:"steal"` // given to other guests
	Busy  float64 `json:"busy"`  // used here: neither idle nor stolen
}

// Between returns the usage from a to b; zero if no time passed (or the
// samples are from different counters).
func Between(a, b Sample) Usage {
	if b.Total <= a.Total || b.Steal < a.Steal || b.Idle < a.Idle {
		return Usage{}
	}
	d := float64(b.Total - a.Total)
	steal, idle := float64(b.Steal-a.Steal), float64(b.Idle-a.Idle)
	return Usage{Steal: steal / d, Busy: max(0, d-steal-idle) / d}
}

// Noisy is the steal share above which a run's figures are reported as
// noisy: a twentieth of the machine's time taken away at random moments
// moves percentiles more than most differences being measured.
const Noisy = 0.05

// Note is a sentence for a report about u, or "" if steal was below Noisy.
func (u Usage) Note() string {
	if u.Steal < Noisy {
		return ""
	}
	return fmt.Sprintf("The hypervisor took %.0f%% of this machine's CPU time during the run (steal, /proc/stat): its figures are noisy; compare them with a run that shows less.", 100*u.Steal)
}
