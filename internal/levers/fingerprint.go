package levers

import (
	"hash/maphash"
	"maps"
	"slices"
	"strconv"

	"github.com/firstword/firstword/internal/chat"
)

// fingerprintSeed is the process's seed for request fingerprints: they
// are compared within one process's memory only.
var fingerprintSeed = maphash.MakeSeed()

// fingerprint identifies a request's content for the lever advisor, never
// kept as text: repeat hashes what the cache key does (the tenant, the
// alias, the messages, the tools and every setting that changes the
// answer), 0 for a
// request no cache would take (several choices, the rest of an answer);
// prefix hashes its stable prefix (the leading system messages and the
// tools; 0 for none), of about prefixTokens tokens.
func fingerprint(req *chat.Request) (repeat, prefix uint64, prefixTokens int) {
	var h maphash.Hash
	h.SetSeed(fingerprintSeed)
	str := func(s string) {
		h.WriteString(strconv.Itoa(len(s)))
		h.WriteByte(':')
		h.WriteString(s)
	}
	str(req.Hints.Tenant)
	str(req.Model)
	system := 0
	for system < len(req.Messages) && req.Messages[system].Role == chat.RoleSystem {
		system++
	}
	for _, t := range req.Tools {
		str(t.Name)
		str(t.Description)
		h.Write(t.Parameters)
		prefixTokens += chat.EstimateTokens(t.Description) + len(t.Parameters)/4
	}
	for i, m := range req.Messages {
		if i == system {
			if system > 0 || len(req.Tools) > 0 {
				prefix = h.Sum64()
			}
		}
		str(string(m.Role))
		str(m.Name)
		str(m.Content)
		for _, p := range m.Parts {
			str(p.Text)
			if p.Data != "" {
				str(p.Data)
			} else {
				str(p.ImageURL)
			}
		}
		for _, b := range m.Thinking {
			str(b.Text)
		}
		for _, c := range m.ToolCalls {
			str(c.ID)
			str(c.Name)
			str(c.Arguments)
		}
		str(m.ToolCallID)
		if i < system {
			prefixTokens += chat.EstimateTokens(m.Content)
		}
	}
	if system == len(req.Messages) && (system > 0 || len(req.Tools) > 0) {
		prefix = h.Sum64()
	}
	if prefix == 0 {
		prefixTokens = 0
	}
	if req.Choices() > 1 || req.Hints.Continues != "" {
		return 0, prefix, prefixTokens
	}
	str(strconv.Itoa(req.MaxTokens))
	for _, f := range []*float64{req.Temperature, req.TopP} {
		if f != nil {
			str(strconv.FormatFloat(*f, 'g', -1, 64))
		} else {
			str("-")
		}
	}
	for _, s := range req.Stop {
		str(s)
	}
	h.Write(req.ResponseFormat)
	str(req.Hints.Sim)
	if req.Seed != nil {
		str(strconv.FormatInt(*req.Seed, 10))
	}
	if c := req.ToolChoice; c != nil {
		str(c.Mode)
		str(c.Name)
	}
	if req.ParallelToolCalls != nil {
		str(strconv.FormatBool(*req.ParallelToolCalls))
	}
	if len(req.Extra) > 0 {
		for _, k := range slices.Sorted(maps.Keys(req.Extra)) {
			str(k)
			h.Write(req.Extra[k])
		}
	}
	if t := req.Thinking; t != nil {
		str(t.Effort)
		str(strconv.Itoa(t.BudgetTokens))
	}
	return max(h.Sum64(), 1), prefix, prefixTokens
}
