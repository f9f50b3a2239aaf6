package contextsrc

import (
	"cmp"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"strings"
)

// BM25 parameters.
const (
	bm25K1 = 1.2
	bm25B  = 0.75
)

// Index is an in-memory BM25 index over the passages of a folder of
// documents. It is immutable once built and safe for concurrent use.
type Index struct {
	passages []passage
	// norm[p] is k1·(1 − b + b·len(p)/avgLen), the length part of BM25.
	norm  []float64
	terms map[string]*term
}

type passage struct {
	doc  string
	n    int
	text string
}

type term struct {
	idf      float64
	postings []posting
}

type posting struct {
	passage int32
	tf      int32
}

// Hit is a passage that matches a query.
type Hit struct {
	// Doc is the document's path relative to the indexed folder, with
	// forward slashes.
	Doc string
	// Passage is the passage's index within Doc, from 0.
	Passage int
	// Text is the passage as written in the document.
	Text string
	// Score is the passage's BM25 score for the query.
	Score float64
}

// BuildIndex walks dir recursively and indexes every *.md and *.txt file
// (extension case-insensitive), skipping files and folders whose name starts
// with a dot. Each document is split into passages of roughly 40 to 200
// words (paragraphs, merged or cut). Passages are tokenized into lowercase
// runs of letters and digits without English stopwords and scored with
// BM25 (k1 = 1.2, b = 0.75, idf = ln(1 + (N − df + 0.5)/(df + 0.5))). A
// folder with no documents gives an empty index.
func BuildIndex(dir string) (*Index, error) {
	if st, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("build index: %w", err)
	} else if !st.IsDir() {
		return nil, fmt.Errorf("build index: %s is not a directory", dir)
	}
	ix := &Index{terms: make(map[string]*term)}
	var total int
	var lengths []int
	var toks []string
	tf := make(map[string]int32)
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if path != dir && strings.HasPrefix(d.Name(), ".") {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if d.IsDir() {
			return nil
		}
		if ext := strings.ToLower(filepath.Ext(path)); ext != ".md" && ext != ".txt" {
			return nil
		}
		if st, err := os.Stat(path); err != nil || !st.Mode().IsRegular() {
			return err // a broken link is an error; a link to a folder is skipped
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		if err != nil {
			return err
		}
		rel = filepath.ToSlash(rel)
		for n, text := range splitPassages(strings.ToValidUTF8(string(data), "\uFFFD")) {
			p := int32(len(ix.passages))
			ix.passages = append(ix.passages, passage{doc: rel, n: n, text: text})
			toks = appendTokens(toks[:0], text)
			lengths = append(lengths, len(toks))
			total += len(toks)
			clear(tf)
			for _, t := range toks {
				tf[t]++
			}
			for t, c := range tf {
				tm := ix.terms[t]
				if tm == nil {
					tm = &term{}
					ix.terms[t] = tm
				}
				tm.postings = append(tm.postings, posting{passage: p, tf: c})
			}
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("build index: %w", err)
	}
	n := float64(len(ix.passages))
	avg := float64(total) / max(n, 1)
	ix.norm = make([]float64, len(lengths))
	for i, l := range lengths {
		ix.norm[i] = bm25K1 * (1 - bm25B + bm25B*float64(l)/max(avg, 1e-9))
	}
	for _, tm := range ix.terms {
		df := float64(len(tm.postings))
		tm.idf = math.Log(1 + (n-df+0.5)/(df+0.5))
	}
	return ix, nil
}

// Len returns the number of passages.
func (ix *Index) Len() int { return len(ix.passages) }

// Search returns up to k passages that contain a query token, best first;
// equal scores are ordered by Doc and Passage. Repeated query tokens count
// once. An empty query, k ≤ 0 or no match gives nil.
func (ix *Index) Search(query string, k int) []Hit {
	if k <= 0 || len(ix.passages) == 0 {
		return nil
	}
	var buf [16]string
	qt := appendTokens(buf[:0], query)
	var scores []float64
	var touched []int32
	for i, t := range qt {
		tm := ix.terms[t]
		if tm == nil || containsBefore(qt, i) {
			continue
		}
		if scores == nil {
			scores = make([]float64, len(ix.passages))
		}
		for _, p := range tm.postings {
			if scores[p.passage] == 0 {
				touched = append(touched, p.passage)
			}
			tf := float64(p.tf)
			scores[p.passage] += tm.idf * tf * (bm25K1 + 1) / (tf + ix.norm[p.passage])
		}
	}
	if len(touched) == 0 {
		return nil
	}
	// Keep the best k in order by insertion: k is small.
	better := func(a, b int32) bool {
		if scores[a] != scores[b] {
			return scores[a] > scores[b]
		}
		pa, pb := &ix.passages[a], &ix.passages[b]
		if c := cmp.Compare(pa.doc, pb.doc); c != 0 {
			return c < 0
		}
		return pa.n < pb.n
	}
	top := make([]int32, 0, min(k, len(touched)))
	for _, p := range touched {
		if len(top) == k && !better(p, top[k-1]) {
			continue
		}
		if len(top) < k {
			top = append(top, p)
		} else {
			top[k-1] = p
		}
		for j := len(top) - 1; j > 0 && better(top[j], top[j-1]); j-- {
			top[j], top[j-1] = top[j-1], top[j]
		}
	}
	hits := make([]Hit, len(top))
	for i, p := range top {
		ps := &ix.passages[p]
		hits[i] = Hit{Doc: ps.doc, Passage: ps.n, Text: ps.text, Score: scores[p]}
	}
	return hits
}

// containsBefore reports whether toks[i] occurs in toks[:i].
func containsBefore(toks []string, i int) bool {
	for _, t := range toks[:i] {
		if t == toks[i] {
			return true
		}
	}
	return false
}
