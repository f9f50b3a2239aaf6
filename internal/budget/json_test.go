package budget

import (
	"encoding/json"
	"math"
	"testing"
	"time"
)

// plainTimings is Timings without its MarshalJSON, for encoding/json's own
// encoding.
type plainTimings struct {
	TTFWMs       float64       `json:"ttfw_ms"`
	TTFThoughtMs float64       `json:"ttfthought_ms,omitempty"`
	ThinkingMs   float64       `json:"thinking_ms,omitempty"`
	TTCMs        float64       `json:"ttc_ms"`
	Stages       []StageTiming `json:"stages"`
}

func checkSame(t *testing.T, tm Timings) {
	t.Helper()
	got, err := json.Marshal(tm)
	if err != nil {
		t.Fatal(err)
	}
	want, err := json.Marshal(plainTimings(tm))
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != string(want) {
		t.Errorf("MarshalJSON\n got %s\nwant %s", got, want)
	}
}

func TestTimingsJSON(t *testing.T) {
	for _, tm := range []Timings{
		{},
		{Stages: []StageTiming{}},
		{TTFWMs: 51.257, TTCMs: 576.053, Stages: []StageTiming{
			{Name: "auth", StartMs: 0.01, EndMs: 0.012},
			{Name: "upstream hold/bench", StartMs: 0.172, EndMs: 576.04, Note: "ok", Group: true},
		}},
		{TTFWMs: 1e-7, TTCMs: 1e22, Stages: []StageTiming{{Name: "a\"b\\c<d>&e\n\t\x01\u2028\u2029é\xff", Note: "x", StartMs: -0.5, EndMs: 123456789.125}}},
		{TTFWMs: math.SmallestNonzeroFloat64, TTCMs: math.MaxFloat64},
		{TTFWMs: 2210.5, TTFThoughtMs: 180.25, ThinkingMs: 2030.125, TTCMs: 2600, Stages: []StageTiming{{Name: "first_thought", StartMs: 1, EndMs: 180.25}}},
		{TTFThoughtMs: 180.25}, // thought, then failed before the answer
	} {
		checkSame(t, tm)
	}
}

func FuzzTimingsJSON(f *testing.F) {
	f.Add("auth", "ok", 0.01, 0.012, true)
	f.Add("a<b>\u2028", "\xff", 1e-9, 1e21, false)
	f.Add("thinking", "", 180.25, 2210.5, false)
	f.Fuzz(func(t *testing.T, name, note string, start, end float64, group bool) {
		if math.IsNaN(start) || math.IsInf(start, 0) || math.IsNaN(end) || math.IsInf(end, 0) {
			return
		}
		checkSame(t, Timings{TTFWMs: start, TTFThoughtMs: start, ThinkingMs: end, TTCMs: end, Stages: []StageTiming{{Name: name, StartMs: start, EndMs: end, Note: note, Group: group}}})
	})
}

func TestRecorderAppendJSON(t *testing.T) {
	start := time.Now()
	at := func(us int) time.Time { return start.Add(time.Duration(us) * time.Microsecond) }
	empty := New(start)
	full := New(start)
	// Added out of order, with a note, a group and a name to escape.
	full.Add("model/first-token", at(300), at(51257), "ok")
	full.Add("auth", at(10), at(12), "")
	full.AddGroup("upstream \"bench\"<1>", at(172), at(576040), "")
	full.FirstWord(at(51257))
	full.Complete(at(576053))
	thought := New(start)
	thought.Add("first_thought", at(300), at(1800), "ok")
	thought.Thought(at(1800), 49457*time.Microsecond)
	thought.Thought(at(9000), time.Second) // only the first counts
	thought.FirstWord(at(51257))
	for name, r := range map[string]*Recorder{"empty": empty, "full": full, "thought": thought} {
		want, err := json.Marshal(r.Timings())
		if err != nil {
			t.Fatal(err)
		}
		prefix := []byte("kept:")
		got := r.AppendJSON(prefix)
		if string(got[:len(prefix)]) != "kept:" || string(got[len(prefix):]) != string(want) {
			t.Errorf("%s: AppendJSON\n got %s\nwant kept:%s", name, got, want)
		}
		if string(r.JSON()) != string(want) {
			t.Errorf("%s: JSON\n got %s\nwant %s", name, r.JSON(), want)
		}
	}
}

// TestThought: the first thought and the thinking time are the first
// call's, and the timings carry them only when the model thought.
func TestThought(t *testing.T) {
	start := time.Now()
	r := New(start)
	if got := string(r.JSON()); got != `{"ttfw_ms":0,"ttc_ms":0,"stages":[]}` {
		t.Errorf("no thought: %s", got)
	}
	r.Thought(start.Add(180250*time.Microsecond), 2030125*time.Microsecond)
	r.Thought(start.Add(time.Second), time.Second)
	r.FirstWord(start.Add(2210500 * time.Microsecond))
	if r.TTFThought() != 180250*time.Microsecond || r.Thinking() != 2030125*time.Microsecond {
		t.Errorf("TTFThought %v, Thinking %v; want 180.25ms, 2.030125s", r.TTFThought(), r.Thinking())
	}
	if got := string(r.JSON()); got != `{"ttfw_ms":2210.5,"ttfthought_ms":180.25,"thinking_ms":2030.125,"ttc_ms":0,"stages":[]}` {
		t.Errorf("thought: %s", got)
	}
}

// TestServerTiming: the stages ended by then, a repeated name numbered,
// names and notes made safe for the header.
func TestServerTiming(t *testing.T) {
	start := time.Now()
	at := func(ms int) time.Time { return start.Add(time.Duration(ms) * time.Millisecond) }
	r := New(start)
	r.Add("route", at(0), at(1), "")
	r.Add("first_thought", at(1), at(51), "sim/reasoner")
	r.Add("ttft", at(1), at(20), "a b")
	r.Add("ttft", at(30), at(251), "sim/reasoner")
	r.Add("generation", at(251), at(900), "")
	want := `route;dur=1, first_thought;dur=50;desc="sim/reasoner", ttft;dur=19;desc="a_b", ttft-2;dur=221;desc="sim/reasoner"`
	if got := r.ServerTiming(at(300)); got != want {
		t.Errorf("ServerTiming\n got %s\nwant %s", got, want)
	}
	if got := string(AppendServerTiming(nil, "thinking time", 1500*time.Microsecond, "")); got != "thinking_time;dur=1.5" {
		t.Errorf("AppendServerTiming = %s", got)
	}
}
