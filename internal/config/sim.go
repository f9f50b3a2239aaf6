package config

import "github.com/firstword/firstword/internal/provider/sim"

func simFault(f *Fault) *sim.Fault {
	return &sim.Fault{Mode: f.Mode, After: f.After, Probability: f.Probability, RetryAfter: f.RetryAfter, Factor: f.Factor}
}
