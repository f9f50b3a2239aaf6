package httpapi

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/firstword/firstword/internal/journal"
)

func TestCursor(t *testing.T) {
	for _, c := range []struct {
		id  string
		msg string
		at  position
		bad bool
	}{
		{"", "", position{seq: -1}, false},
		{"7", "", position{seq: 7}, false},
		{"msg_a:7", "msg_a", position{seq: 7}, false},
		{"msg_a:2:41", "msg_a", position{gen: 2, seq: 41}, false},
		{"msg_a:0:4", "", position{seq: -1}, true},
		{"msg_a:x:4", "", position{seq: -1}, true},
		{"msg_a:1:-1", "", position{seq: -1}, true},
		{"msg_a:1:2:3", "", position{seq: -1}, true},
		{"msg_a:", "", position{seq: -1}, true},
	} {
		r := httptest.NewRequest("GET", "/v1/conversations/c/stream", nil)
		if c.id != "" {
			r.Header.Set("Last-Event-ID", c.id)
		}
		msg, at, err := cursor(r)
		if (err != nil) != c.bad || msg != c.msg || at != c.at {
			t.Errorf("cursor(%q) = %q, %+v, %v; want %q, %+v, bad %v", c.id, msg, at, err, c.msg, c.at, c.bad)
		}
	}
}

// A journal taken over twice: generation 0 journaled events 0 to 3 (meta
// and three deltas), generation 1 started at 4 with a rewind, journaled
// 5 and 6, generation 2 started at 7, then 8 and the end at 9.
var generations = []journal.Event{
	{Seq: 0, Kind: journal.KindMeta}, {Seq: 1, Kind: journal.KindDelta}, {Seq: 2, Kind: journal.KindDelta}, {Seq: 3, Kind: journal.KindDelta},
	{Seq: 4, Kind: journal.KindRewind}, {Seq: 5, Kind: journal.KindDelta}, {Seq: 6, Kind: journal.KindDelta},
	{Seq: 7, Kind: journal.KindRewind}, {Seq: 8, Kind: journal.KindDelta}, {Seq: 9, Kind: journal.KindDone},
}

// What a client at each position is sent: the events after it, and a
// rewind only where it had seen past what its generation journaled.
func TestSentAcrossTakeOvers(t *testing.T) {
	for _, c := range []struct {
		at   position
		want []int64
	}{
		{position{seq: -1}, []int64{0, 1, 2, 3, 5, 6, 8, 9}}, // from the start: no rewind is needed
		{position{seq: 1}, []int64{2, 3, 5, 6, 8, 9}},
		{position{seq: 3}, []int64{5, 6, 8, 9}},      // had every event generation 0 journaled
		{position{seq: 4}, []int64{4, 5, 6, 8, 9}},   // saw one more, never journaled: rewound
		{position{seq: 12}, []int64{4, 5, 6, 8, 9}},  // saw many more
		{position{gen: 1, seq: 5}, []int64{6, 8, 9}}, // within generation 1
		{position{gen: 1, seq: 6}, []int64{8, 9}},    // had all of generation 1
		{position{gen: 1, seq: 7}, []int64{7, 8, 9}}, // past generation 1's journal: rewound again
		{position{gen: 2, seq: 8}, []int64{9}},       // in the last generation
		{position{gen: 2, seq: 9}, nil},              // at the end
		{position{gen: 3, seq: 1}, nil},              // a generation the journal does not have
	} {
		f := sent{at: c.at}
		var got []int64
		for _, ev := range generations {
			if f.send(ev) {
				got = append(got, ev.Seq)
			}
		}
		if !equal(got, c.want) {
			t.Errorf("from %+v: sent %v, want %v", c.at, got, c.want)
		}
	}
}

// A take-over on Redis numbers its events from a fence far past the
// dead producer's last (journal/redis Take): a client that saw past what
// was journaled is still told to rewind.
func TestSentAcrossAFence(t *testing.T) {
	const fence = 1 << 20
	evs := []journal.Event{
		{Seq: 0, Kind: journal.KindMeta}, {Seq: 1, Kind: journal.KindDelta}, {Seq: 2, Kind: journal.KindDelta},
		{Seq: fence + 3, Kind: journal.KindRewind, Data: []byte(`{"offset":4,"generation":1}`)},
		{Seq: fence + 4, Kind: journal.KindDelta}, {Seq: fence + 5, Kind: journal.KindDone},
	}
	for _, c := range []struct {
		at   position
		want []int64
	}{
		{position{seq: -1}, []int64{0, 1, 2, fence + 4, fence + 5}},
		{position{seq: 2}, []int64{fence + 4, fence + 5}},
		{position{seq: 3}, []int64{fence + 3, fence + 4, fence + 5}},
		{position{gen: 1, seq: fence + 4}, []int64{fence + 5}},
	} {
		f := sent{at: c.at}
		var got []int64
		for _, ev := range evs {
			if f.send(ev) {
				got = append(got, ev.Seq)
			}
		}
		if !equal(got, c.want) || (len(got) > 0 && f.gen != 1) {
			t.Errorf("from %+v: sent %v (generation %d), want %v", c.at, got, f.gen, c.want)
		}
	}
}

func equal(a, b []int64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// The journaled text is cut back at each rewind to its offset.
func TestJournaledTextRewinds(t *testing.T) {
	ev := func(kind, data string) journal.Event { return journal.Event{Kind: kind, Data: []byte(data)} }
	evs := []journal.Event{ev("meta", `{}`), ev("delta", `{"text":"Hello wor"}`), ev("delta", `{"text":"ld, café"}`),
		ev("rewind", `{"offset":6,"offset_bytes":6}`), ev("delta", `{"text":"world, tea"}`),
		ev("rewind", `{"offset":0,"offset_bytes":0}`), ev("delta", `{"text":"Hello world, tea."}`)}
	if got, n := JournaledText(evs[:3]); got != "Hello world, café" || n != 2 {
		t.Errorf("before the rewinds: %q, %d", got, n)
	}
	if got, _ := JournaledText(evs[:5]); got != "Hello world, tea" {
		t.Errorf("after one rewind: %q", got)
	}
	if got, _ := JournaledText(evs); got != "Hello world, tea." {
		t.Errorf("after a rewind to the start: %q", got)
	}
}

// FuzzCursor: any Last-Event-ID is a position or a 400, never a panic,
// and a position it accepts for a message id is one it writes back the
// same way.
func FuzzCursor(f *testing.F) {
	for _, s := range []string{"", "7", "msg_a:7", "msg_a:2:41", "msg_a:0:4", "::", "msg:1:", "-1", "msg_a:99999999999999999999"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, id string) {
		r := httptest.NewRequest("GET", "/", nil)
		r.Header["Last-Event-Id"] = []string{id}
		msg, at, err := cursor(r)
		// Only the server's own ids are written back: a message id of
		// the store's alphabet.
		if err != nil || id == "" || msg == "" || at.seq < 0 || strings.ContainsAny(msg, "\r\n") {
			return
		}
		back := string(appendEvent(nil, msg, at.gen, journal.Event{Seq: at.seq}))
		written, _, _ := strings.Cut(strings.TrimPrefix(back, "id: "), "\n")
		r = httptest.NewRequest("GET", "/", nil)
		r.Header["Last-Event-Id"] = []string{written}
		m2, at2, err := cursor(r)
		if err != nil || m2 != msg || at2 != at {
			t.Errorf("%q read as %q %+v, written back as %q, read again as %q %+v, %v", id, msg, at, back, m2, at2, err)
		}
	})
}
