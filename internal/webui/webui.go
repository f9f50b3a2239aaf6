// Package webui serves firstword's pages, embedded in the binary: the chat
// page at / (the reference client of /v1/chat), the latency budget at
// /budget and the icon at /favicon.ico. Plain HTML, CSS and JavaScript: there is no build step.
package webui

import (
	"embed"
	"io/fs"
	"net/http"
)

//go:embed static
var static embed.FS

// Handler serves the pages and their assets.
func Handler() http.Handler {
	sub, _ := fs.Sub(static, "static")
	files := http.FileServer(http.FS(sub))
	mux := http.NewServeMux()
	page := func(name string) http.HandlerFunc {
		return func(w http.ResponseWriter, r *http.Request) {
			b, err := fs.ReadFile(sub, name)
			if err != nil {
				http.Error(w, "not found", http.StatusNotFound)
				return
			}
			h := w.Header()
			h.Set("Content-Type", "text/html; charset=utf-8")
			h.Set("Cache-Control", "no-cache")
			h.Set("X-Content-Type-Options", "nosniff")
			// Model output is untrusted: no inline scripts, no plugins, no
			// framing, and connections only back to this server.
			h.Set("Content-Security-Policy", "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'")
			w.Write(b)
		}
	}
	mux.HandleFunc("GET /{$}", page("chat.html"))
	mux.HandleFunc("GET /budget", page("budget.html"))
	// Browsers and tools that ignore the pages' <link rel=icon> ask for
	// /favicon.ico: the same SVG (which every current browser takes).
	mux.HandleFunc("GET /favicon.ico", func(w http.ResponseWriter, r *http.Request) {
		b, _ := fs.ReadFile(sub, "icon.svg")
		h := w.Header()
		h.Set("Content-Type", "image/svg+xml")
		h.Set("Cache-Control", "max-age=86400")
		h.Set("X-Content-Type-Options", "nosniff")
		w.Write(b)
	})
	mux.Handle("GET /static/", http.StripPrefix("/static/", withHeaders(files)))
	return mux
}

func withHeaders(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Content-Type-Options", "nosniff")
		w.Header().Set("Cache-Control", "no-cache")
		h.ServeHTTP(w, r)
	})
}
