package redis

import (
	"context"
	"testing"

	"github.com/firstword/firstword/internal/journal"
	"github.com/firstword/firstword/internal/journal/journaltest"
	"github.com/firstword/firstword/internal/redisconn"
	"github.com/firstword/firstword/internal/redistest"
)

// TestConformanceOnACluster and TestConformanceOnSentinel run the
// journal's conformance suite (replay, live following, ends, lost
// producers, stop and attachment across replicas, retention, the cap) on
// a Redis Cluster and on a Sentinel-watched master of the test's own.
func TestConformanceOnACluster(t *testing.T) {
	cl := redistest.NewCluster(t, 3)
	conformance(t, redisconn.Server{URL: cl.URL(), Cluster: true})
}

func TestConformanceOnSentinel(t *testing.T) {
	s := redistest.NewSentinel(t)
	conformance(t, redisconn.Server{URL: s.URL(), SentinelMaster: s.MasterName})
}

func conformance(t *testing.T, s redisconn.Server) {
	journaltest.Run(t, journaltest.Harness{
		Open: func(t *testing.T, o journal.Options) (journal.Journal, journal.Journal) {
			o.KeyPrefix = prefix(t)
			return openServer(t, s, o), openServer(t, s, o)
		},
		Crash: func(w journal.Writer) { w.(*writer).crash() },
	})
}

// openServer opens a journal on s, closed when the test ends.
func openServer(t testing.TB, s redisconn.Server, o journal.Options) *Journal {
	t.Helper()
	j, err := Open(context.Background(), s, o, nil)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { j.Close() })
	return j
}
