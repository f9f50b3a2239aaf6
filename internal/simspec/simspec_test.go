package simspec

import "testing"

func TestFaultValidate(t *testing.T) {
	for _, tc := range []struct {
		name  string
		fault Fault
		want  string
	}{
		{"none", Fault{}, ""},
		{"a mid-stream error", Fault{Mode: FaultErrorMid, After: 3, Probability: 0.5}, ""},
		{"unknown mode", Fault{Mode: "boom"}, `unknown fault mode "boom" (want one of 429, 500, 503, hang, error_mid, stall_mid, slow, truncate, error_thinking)`},
		{"probability", Fault{Mode: Fault500, Probability: 2}, "fault probability 2 is not between 0 and 1"},
		{"after", Fault{Mode: FaultStallMid, After: -1}, "fault after -1 is negative"},
	} {
		got := ""
		if err := tc.fault.Validate(); err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("%s: Validate() = %q, want %q", tc.name, got, tc.want)
		}
	}
}
