// Package journal keeps the events of /v1/chat answers so that a client
// that lost its connection can resume, on any replica: replay from a
// cursor, then follow the live answer to its terminal event. It also
// carries a stop request to the answer's producer, wherever it runs, and
// tells the producer whether anyone is still attached (for the grace
// window after a drop).
//
// # Ids
//
// An answer's events are numbered by Seq: 0 for meta, then one more for
// each thinking or delta event, and the terminal done or error event
// last. A journal keeps every kind alike: only the terminal ones mean
// anything to it. A client's
// cursor (Last-Event-ID, after) is the Seq of the last event it has;
// Follow yields exactly the events after it, each once, in order, then
// the live ones, and ends after the terminal event. A cursor at or past
// the terminal event yields nothing and ends at once.
//
// # Errors a resume can meet
//
//   - ErrNotFound: nothing to resume (never journaled, or dropped after
//     its retention).
//   - ErrLost: the producing replica died before the end. Everything
//     journaled was yielded first; the sweeper stores the answer
//     interrupted with Snapshot's text.
//   - ErrTruncated: the answer outgrew its journal (below); everything
//     before the cut was yielded first. The stored message has the whole
//     text once the answer ends.
//   - ErrUnavailable: the Redis journal cannot be reached.
//
// # Two journals
//
// Memory, the embedded default, keeps everything in process: one replica
// only, and a restart forgets it. Package journal/redis keeps it in Redis,
// so a resume on replica B follows an answer produced on replica A and a
// stop on B stops it on A. Both pass the conformance suite in
// journal/journaltest.
//
// # Bounds
//
// Each event counts its data plus 64 bytes.
//
//   - Per answer, MaxMessageBytes (default 4 MiB): the event that would
//     pass it and every later one but the terminal event are not
//     journaled; a follower gets ErrTruncated at the cut (not a gap), and
//     the terminal event is still journaled so the answer still ends.
//   - In process, MaxTotalBytes (default 256 MiB) bounds all journals:
//     an append that would pass it first drops ended journals, the
//     oldest end first; if only live ones are left, the appending answer
//     is cut as above. The data is copied into 8 KiB chunks, so the
//     memory held is within an eighth of what is counted, plus a chunk
//     per answer.
//   - Redis, MaxTotalBytes (default 64 MiB) bounds what waits in this
//     process to be written (it piles up only while Redis is slow or
//     down): an append that would pass it is dropped, counted
//     (Stats.Dropped), and its answer cut as above. Redis itself holds at
//     most MaxMessageBytes of events per answer (no MAXLEN: trimming
//     would make a silent gap at the start).
//
// # Retention
//
// An ended answer stays replayable for Retention (default 10 min), then
// is dropped (ErrNotFound). A lost answer likewise, counted from when it
// was lost (in Redis, from the producer's last renewal).
//
// # Lease
//
// A producer on Redis holds a lease per answer (Lease, default 5 s),
// renewed every Lease/3 by one pipeline for all of the process's answers,
// on a goroutine of its own (a slow write does not delay it).
// If the process dies, the lease lapses: followers get ErrLost within
// Lease plus a follower's check interval (min(Lease/3, 500 ms)), and
// Snapshot reports Lost. Closing a journal with answers still being
// written releases their leases at once. In process there is no lease:
// the producer dies with the journal.
//
// # Stop and attachment
//
// Stop closes the producer's Writer.Stopped. In Redis it sets a stop key
// (read at the next renewal, so a lost pub/sub message still stops the
// producer within Lease/3) and publishes on one channel per key prefix,
// to which each process has one subscriber. A follower is attached while
// Follow runs: in Redis, a member of the answer's attachment set with a
// TTL of one lease, refreshed at each check and announced on the channel;
// Writer.Attached is true at once on attachment and false by the next
// renewal after the last follower left (or its TTL lapsed).
//
// # What Redis stores
//
// Per answer, under KeyPrefix (default "firstword:journal:") and a hash
// tag of the message id, so one answer's keys share a cluster slot:
//
//   - {id}:s, a stream: one entry per event at ID "<seq>-1" (fields k,
//     the kind, and d, the data; e=1 on the terminal event, c=1 on it if
//     the answer was cut), and markers: m=cut at the cut, m=end at
//     "<seq>-2" for an end without its own event. The explicit IDs make a
//     retried write harmless (Redis refuses an ID not above the last) and
//     make XREAD from "<after>-1" return exactly the events after the
//     cursor. TTL: Retention plus Lease while live, Retention after the
//     end.
//   - {id}:lease, the producer's lease (TTL Lease); deleted at the end,
//     after the terminal event is written.
//   - {id}:stop, set by Stop; {id}:att, the attachment set.
//   - One channel, <prefix>ctl, carries stops and attachments.
//
// # Cost per event
//
// Append never waits for I/O: it copies the data under a lock held for
// the copy (in process, the journal's one mutex; Redis, the answer's
// own), with no allocation on average. On the loaded 2-core test
// machine: Redis, about 0.25 µs on the producer's path
// (BenchmarkAppendCaller); in process, 0.6 to 2 µs
// (BenchmarkMemoryAppend, which keeps 64 MiB of journals, so counts the
// garbage collector's work on them). The Redis writer's own work, off
// that path, is a few µs of CPU per event (BenchmarkAppend, end to end,
// with Redis on the same two cores). In Redis, one goroutine
// per process writes whatever is queued as soon as it is idle, in one
// pipeline (XADD per event), so the live path never waits for Redis and
// a busy stream's events share round trips.
//
// # When Redis is unreachable
//
// Appends keep returning at once; the writer retries with backoff (up to
// a second between tries) and holds at most MaxTotalBytes, dropping and
// cutting beyond it. A Redis that comes back empty (restarted without
// persistence) has lost what it held: the journal notices at its next
// write (XADD NOMKSTREAM finds no stream) and cuts the answer at its
// start, so a resume gets ErrTruncated rather than a gap (or, if the
// first write's reply was lost with the server, writes the answer again
// from its start). Follow and
// Stop return ErrUnavailable while Redis is down. A lease that lapsed
// meanwhile is not taken again: the answer reads as lost (followers may
// already have been told so) until its end is written.
package journal
