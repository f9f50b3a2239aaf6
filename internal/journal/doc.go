// Package journal keeps the events of /v1/chat answers so that a client
// that lost its connection can resume, on any replica: replay from a
// cursor, then follow the live answer to its terminal event. It also
// carries a stop request to the answer's producer and tells the producer
// whether anyone is still attached (the grace window after a drop).
//
// Memory is the in-process journal; package journal/redis shares one
// across replicas.
package journal
