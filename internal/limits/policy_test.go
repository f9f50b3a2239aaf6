package limits

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestOverrideApplyAndMerge(t *testing.T) {
	cfg := Policy{Limits: Rates{RequestsPerMinute: 10, TokensPerMinute: 1000}, Budget: Budget{USDPerDay: 5}}
	var a Override
	if err := json.Unmarshal([]byte(`{"requests_per_minute": 3, "usd_per_month": 50}`), &a); err != nil {
		t.Fatal(err)
	}
	var b Override
	if err := json.Unmarshal([]byte(`{"requests_per_minute": 0, "concurrent_streams": 2}`), &b); err != nil {
		t.Fatal(err)
	}
	got := a.Merge(b).Apply(cfg)
	want := Policy{Limits: Rates{RequestsPerMinute: 0, TokensPerMinute: 1000, ConcurrentStreams: 2}, Budget: Budget{USDPerDay: 5, USDPerMonth: 50}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Apply (-want +got):\n%s", diff)
	}
	for _, tc := range []struct{ in, field string }{
		{`{"requests_per_minute": -1}`, "requests_per_minute"},
		{`{"usd_per_day": -0.5}`, "usd_per_day"},
		{`{"tokens_per_month": -2}`, "tokens_per_month"},
		{`{"soft_threshold": 1.5}`, "soft_threshold"},
		{`{"soft_threshold": 0.5, "concurrent_streams": 3}`, ""},
	} {
		o, err := ParseOverride([]byte(tc.in))
		if err != nil {
			t.Fatalf("%s: %v", tc.in, err)
		}
		if field, _ := o.Check(); field != tc.field {
			t.Errorf("Check(%s) = %q, want %q", tc.in, field, tc.field)
		}
	}
}

// FuzzParseOverride: any bytes either fail to parse or give an override
// that checks, applies, merges and round-trips without panicking.
func FuzzParseOverride(f *testing.F) {
	for _, s := range []string{`{}`, `{"requests_per_minute": 3}`, `{"usd_per_day": 1.5, "soft_threshold": 0.9}`,
		`{"tokens_per_month": -1}`, `{"concurrent_streams": 1e30}`, `null`, `[]`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		o, err := ParseOverride(b)
		if err != nil {
			return
		}
		o.Check()
		o.Merge(o).Apply(Policy{})
		again, err := json.Marshal(o)
		if err != nil {
			return // NaN cannot come from JSON; nothing else fails
		}
		back, err := ParseOverride(again)
		if err != nil {
			t.Fatalf("%s does not parse back: %v", again, err)
		}
		if diff := cmp.Diff(o, back); diff != "" {
			t.Errorf("round trip (-first +second):\n%s", diff)
		}
	})
}
