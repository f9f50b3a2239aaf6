package cli

import (
	"encoding/json"
	"log/slog"
	"net/http"
	"sort"

	"github.com/firstword/firstword/internal/config"
)

func newLogger(env *Env, lc config.Log) *slog.Logger {
	var level slog.Level
	_ = level.UnmarshalText([]byte(lc.Level))
	opts := &slog.HandlerOptions{Level: level}
	if lc.Format == "text" {
		return slog.New(slog.NewTextHandler(env.Stderr, opts))
	}
	return slog.New(slog.NewJSONHandler(env.Stderr, opts))
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json")
	json.NewEncoder(w).Encode(v)
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
