package levers

import "github.com/firstword/firstword/internal/router"

// Report is what was done for one request: what the router did (the
// embedded router.Report, which the router fills) and what the levers in
// front of it did. For an answer replayed from the cache or shared with
// another request, the levers fill the router's part too: the route that
// gave the answer.
type Report struct {
	router.Report
	// Cached: replayed from the response cache.
	Cached bool
	// Coalesced: shared another identical request's upstream stream.
	Coalesced bool
	// BillShare is the share of the upstream usage billed to this
	// request: 1, unless it was coalesced (its part) or cached (none).
	BillShare float64
	// BillPart is this request's part of a shared stream's usage: part
	// [0] of [1] equal parts ([1] is 0 when it was not shared).
	BillPart [2]int
	// Rule is the routing rule that chose the alias that served ("" if
	// none); Requested the alias the client asked for, when one did.
	Rule, Requested string
	// HideThinking: the alias does not show its thinking (show: false),
	// which its call then clears from what it delivers (see call.Call).
	HideThinking bool
	// Fingerprint identifies the request's content and its stable prefix
	// for the lever advisor (see fingerprint).
	Fingerprint Fingerprint
}

// Fingerprint is a request's content hashes (see fingerprint).
type Fingerprint struct {
	Repeat, Prefix uint64
	PrefixTokens   int
}
