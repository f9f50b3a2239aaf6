package provider

import (
	"fmt"
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/firstword/firstword/internal/chat"
)

// MinSecretLen is the length, in bytes, below which a configured value is
// not scrubbed from error text: a shorter one would mangle ordinary words
// (and is too short to be a real credential), and the fragments of a
// credential this long or longer are scrubbed too.
const MinSecretLen = 8

// redacted replaces a secret in error text.
const redacted = "[redacted]"

// Scrubber removes what an adapter was configured with from the errors it
// returns: error text comes from the upstream (which may quote the key it
// rejected, or a header it was sent), and it reaches the client, the log
// and the stored message alike.
//
// An auth failure (category auth, or HTTP 401) loses the upstream's text
// entirely, for a generic message naming the provider: upstreams quote a
// rejected key partly masked (OpenAI: "sk-proj-****...abcd"), in forms no
// exact match finds. In any other error every secret is replaced by
// "[redacted]". Every configured header value, and each of its
// space-separated words, is matched exactly (but anthropic-beta,
// anthropic-version and openai-beta, public by nature and quoted by the
// error that rejects one). Credentials, the API key and the words of the
// values of headers named like one (Authorization, X-Api-Key, ...), are
// matched harder: any run of MinSecretLen bytes or more that is part of one
// (a key cut short by truncation, or quoted in part), and a masked form (a
// prefix of it, a run of '*', '.', '•' or '…', then at least its last 4
// bytes). Matching is byte-exact and case-sensitive; values and words
// shorter than MinSecretLen are not scrubbed.
//
// A Scrubber is safe for concurrent use.
type Scrubber struct {
	name   string
	advice string   // what to check when the credentials are rejected
	exact  []string // header values and their words that are not credentials
	creds  []string // credentials and their words
	grams  map[string]struct{}
}

// publicHeader reports whether the values of the header named name are
// public by nature (beta and version names, which an upstream quotes in
// the error that rejects one), and left in error text.
func publicHeader(name string) bool {
	switch strings.ToLower(name) {
	case "anthropic-beta", "anthropic-version", "openai-beta":
		return true
	}
	return false
}

// NewScrubber returns the Scrubber of the provider name, configured with
// apiKey (empty when there is none) and headers.
func NewScrubber(name, apiKey string, headers map[string]string) *Scrubber {
	s := &Scrubber{name: name}
	if len(apiKey) >= MinSecretLen {
		s.creds = append(s.creds, apiKey)
	}
	hasHeaders := false
	for k, v := range headers {
		if publicHeader(k) {
			continue
		}
		hasHeaders = true
		words := strings.Fields(v)
		for _, w := range words {
			if len(w) < MinSecretLen {
				continue
			}
			if credentialName(k) {
				s.creds = append(s.creds, w)
			} else {
				s.exact = append(s.exact, w)
			}
		}
		// The whole of a value of several words, exactly: its fragments
		// would take the spaces around a credential with it.
		if len(words) > 1 && len(v) >= MinSecretLen {
			s.exact = append(s.exact, v)
		}
	}
	if len(s.creds) > 0 {
		s.grams = make(map[string]struct{})
		for _, c := range s.creds {
			for i := 0; i+MinSecretLen <= len(c); i++ {
				s.grams[c[i:i+MinSecretLen]] = struct{}{}
			}
		}
	}
	switch {
	case apiKey != "" && hasHeaders:
		s.advice = "check its api_key_env and headers"
	case apiKey != "":
		s.advice = "check its api_key_env"
	case hasHeaders:
		s.advice = "check its headers"
	default:
		s.advice = "none are configured, set its api_key_env or headers"
	}
	return s
}

// credentialName reports whether a header or query parameter named name
// carries a credential: Authorization, Proxy-Authorization, X-Api-Key,
// api-key, x-goog-api-key, key, access_token, X-Amz-Signature, sig...
func credentialName(name string) bool {
	n := strings.ToLower(name)
	if n == "sig" || n == "cookie" {
		return true
	}
	for _, w := range [...]string{"auth", "key", "token", "secret", "password", "signature", "credential"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

// Error returns err as a client, a log and the store may see it (see
// Scrubber): a *chat.Error is copied, never changed in place; an error
// with nothing to scrub is returned as it is. An auth failure keeps its
// category, status and provider, and loses its Err. Any other error whose
// cause quotes a secret gets a cause whose Error() is scrubbed and which
// unwraps to the original, so errors.Is still finds sentinels.
func (s *Scrubber) Error(err error) error {
	if err == nil {
		return nil
	}
	ce, ok := err.(*chat.Error)
	if !ok {
		return s.cause(err)
	}
	if ce.Category == chat.CategoryAuth || ce.Status == 401 {
		c := *ce
		c.Message = s.authMessage(ce.Status)
		c.Err = nil
		return &c
	}
	msg := s.Scrub(ce.Message)
	var cause error
	if ce.Err != nil {
		cause = s.cause(ce.Err)
	}
	if msg == ce.Message && cause == ce.Err {
		return err
	}
	c := *ce
	c.Message, c.Err = msg, cause
	return &c
}

// authMessage is an auth failure's message: the upstream's may quote the
// key it rejected.
func (s *Scrubber) authMessage(status int) string {
	if status != 0 {
		return fmt.Sprintf("provider %q rejected the gateway's credentials (HTTP %d): %s", s.name, status, s.advice)
	}
	return fmt.Sprintf("provider %q rejected the gateway's credentials: %s", s.name, s.advice)
}

// cause returns err, or an error with err's text scrubbed that unwraps
// to err when that text quotes a secret.
func (s *Scrubber) cause(err error) error {
	t := err.Error()
	if st := s.Scrub(t); st != t {
		return &scrubbedError{text: st, err: err}
	}
	return err
}

// scrubbedError is an error whose text quoted a secret.
type scrubbedError struct {
	text string
	err  error
}

func (e *scrubbedError) Error() string { return e.text }
func (e *scrubbedError) Unwrap() error { return e.err }

// Scrub returns text with every secret replaced by "[redacted]" (see
// Scrubber); text itself when it holds none.
func (s *Scrubber) Scrub(text string) string {
	if len(text) < MinSecretLen {
		return text
	}
	var hide []bool // hide[i]: byte i is part of a secret
	mark := func(from, to int) {
		if hide == nil {
			hide = make([]bool, len(text))
		}
		for i := from; i < to; i++ {
			hide[i] = true
		}
	}
	for _, x := range s.exact {
		for i := 0; ; {
			j := strings.Index(text[i:], x)
			if j < 0 {
				break
			}
			mark(i+j, i+j+len(x))
			i += j + 1
		}
	}
	if s.grams != nil {
		for i := 0; i+MinSecretLen <= len(text); i++ {
			if _, ok := s.grams[text[i:i+MinSecretLen]]; ok {
				mark(i, i+MinSecretLen)
			}
		}
		s.masked(text, mark)
	}
	if hide == nil {
		return text
	}
	var b strings.Builder
	for i := 0; i < len(text); {
		if !hide[i] {
			b.WriteByte(text[i])
			i++
			continue
		}
		b.WriteString(redacted)
		for i < len(text) && hide[i] {
			i++
		}
	}
	return b.String()
}

// maskedSuffix is how many of a credential's last bytes a masked form
// must show to be recognised: fewer would match ordinary text.
const maskedSuffix = 4

// masked marks the masked forms of credentials in text: a prefix of one
// (possibly empty), a mask (three or more of '*', '.' and '•', or an
// ellipsis '…'), then at least its last maskedSuffix bytes.
func (s *Scrubber) masked(text string, mark func(from, to int)) {
	for i := 0; i < len(text); {
		start := i
		n, ellipsis := 0, false
		for i < len(text) {
			r, size := utf8.DecodeRuneInString(text[i:])
			if r != '*' && r != '.' && r != '•' && r != '…' {
				break
			}
			ellipsis = ellipsis || r == '…'
			n++
			i += size
		}
		if n == 0 {
			_, size := utf8.DecodeRuneInString(text[i:])
			i += size
			continue
		}
		if n < 3 && !ellipsis {
			continue
		}
		for _, c := range s.creds {
			k := 0
			for l := min(len(c)-1, len(text)-i); l >= maskedSuffix; l-- {
				if c[len(c)-l] == text[i] && strings.HasPrefix(text[i:], c[len(c)-l:]) {
					k = l
					break
				}
			}
			if k == 0 {
				continue
			}
			p := 0
			for l := min(len(c)-1, start); l > 0; l-- {
				if c[l-1] == text[start-1] && strings.HasSuffix(text[:start], c[:l]) {
					p = l
					break
				}
			}
			mark(start-p, i+k)
		}
	}
}

// redactURL is u.Redacted (the password hidden) with the values of
// credential-named query parameters (key, api_key, access_token, sig...)
// hidden as well: errors that quote a URL reach logs.
func redactURL(u *url.URL) string {
	if u.RawQuery == "" {
		return u.Redacted()
	}
	params := strings.Split(u.RawQuery, "&")
	changed := false
	for i, p := range params {
		name, _, ok := strings.Cut(p, "=")
		if !ok {
			continue
		}
		if n, err := url.QueryUnescape(name); err == nil && credentialName(n) {
			params[i] = name + "=xxxxx"
			changed = true
		}
	}
	if !changed {
		return u.Redacted()
	}
	ru := *u
	ru.RawQuery = strings.Join(params, "&")
	return ru.Redacted()
}
