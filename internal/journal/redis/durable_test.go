package redis

import (
	"net/url"
	"testing"
	"time"

	"github.com/firstword/firstword/internal/faultproxy"
	"github.com/firstword/firstword/internal/journal"
)

// TestDurable: a producer's journal says it keeps the answer once its
// first write is done, says it no longer does within half a lease of
// Redis's last answer when Redis stops answering (before the lease could
// lapse), and again once Redis is back; an answer cut at its cap is not
// kept, nor one taken over.
func TestDurable(t *testing.T) {
	u, err := url.Parse(redisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	p, err := faultproxy.Start(u.Host)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Thaw(); p.Close() })
	u.Host = p.Addr()
	const lease = 1500 * time.Millisecond
	j := open(t, u.String(), journal.Options{KeyPrefix: prefix(t), Lease: lease, MaxMessageBytes: 1 << 10})

	w := j.Begin("m")
	if journal.Durable(w) {
		t.Error("Durable before the first write")
	}
	w.Append(journal.Event{Seq: 0, Kind: journal.KindMeta, Data: []byte(`{}`)})
	eventually(t, "Durable after the first write", func() bool { return journal.Durable(w) })
	// Through a few renewals: it stays.
	for end := time.Now().Add(lease); time.Now().Before(end); time.Sleep(10 * time.Millisecond) {
		if !journal.Durable(w) {
			t.Fatal("Durable turned false while Redis answers")
		}
	}

	p.Freeze()
	frozen := time.Now()
	eventually(t, "not Durable once Redis stops answering", func() bool { return !journal.Durable(w) })
	// The last renewal before the freeze was sent at most a third of a
	// lease before it, so its lease lapses two thirds of a lease after
	// the freeze at the earliest: the producer knew before.
	if took := time.Since(frozen); took > lease*2/3 {
		t.Errorf("Durable turned false %v after Redis stopped answering, want within %v (before the lease could lapse)", took, lease*2/3)
	}
	p.Thaw()
	w.Append(journal.Event{Seq: 1, Kind: journal.KindDelta, Data: []byte(`{"text":"a"}`)})
	eventually(t, "Durable once Redis is back", func() bool { return journal.Durable(w) })

	// Past MaxMessageBytes the answer is cut: the journal no longer holds
	// all of it.
	big := make([]byte, 2<<10)
	w.Append(journal.Event{Seq: 2, Kind: journal.KindDelta, Data: big})
	if journal.Durable(w) {
		t.Error("Durable after the answer was cut")
	}

	// Taken over (its lease lapsed while Redis was away from it only):
	// the old producer's journal keeps nothing of its own.
	w2 := j.Begin("m2")
	w2.Append(journal.Event{Seq: 0, Kind: journal.KindMeta, Data: []byte(`{}`)})
	eventually(t, "Durable after the first write", func() bool { return journal.Durable(w2) })
	w2.(*writer).taken.Store(true)
	if journal.Durable(w2) {
		t.Error("Durable after a take-over")
	}
}
