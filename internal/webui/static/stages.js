// Shared by the chat page and /budget: how stages look.
"use strict";
window.fwStages = {
  // kind maps a stage name to a colour class.
  kind(name) {
    if (name === "guard" || name === "guard.local") return "st-guard";
    if (name === "context") return "st-context";
    if (name === "history" || name === "retrieval") return "st-source";
    if (name.startsWith("store")) return "st-store";
    if (name === "route" || name === "prompt" || name === "auth" || name === "parse") return "st-route";
    if (name === "ttft") return "st-ttft";
    if (name === "first_thought" || name === "thinking") return "st-thinking";
    if (name === "generation") return "st-generation";
    if (name === "persist") return "st-persist";
    if (name.startsWith("wait ")) return "st-wait";
    if (name.startsWith("upstream ")) return "st-context";
    return "st-source"; // lookups and other named sources
  },
  ms(v) {
    if (!v) return "–";
    if (v < 1) return v.toFixed(2) + " ms";
    if (v < 1000) return Math.round(v) + " ms";
    return (v / 1000).toFixed(2) + " s";
  },
  // waterfall draws one request's stages into a track element scaled to
  // span milliseconds; stages sit in rows so parallel ones do not overlap.
  waterfall(track, stages, span, ttfw) {
    const rows = [];
    const leaves = stages.filter(s => !s.group);
    for (const s of stages) {
      const seg = document.createElement("div");
      seg.className = "seg " + fwStages.kind(s.name) + (s.group ? " group" : "");
      seg.style.left = (100 * s.start_ms / span) + "%";
      seg.style.width = Math.max(0.3, 100 * (s.end_ms - s.start_ms) / span) + "%";
      if (!s.group) {
        let row = 0;
        while (rows[row] !== undefined && rows[row] > s.start_ms) row++;
        rows[row] = s.end_ms;
        seg.style.top = (2 + (row % 2) * 10) + "px";
      }
      seg.title = s.name + ": " + fwStages.ms(s.end_ms - s.start_ms) + (s.note ? " (" + s.note + ")" : "");
      seg.setAttribute("role", "img");
      seg.setAttribute("aria-label", seg.title);
      track.appendChild(seg);
    }
    if (ttfw) {
      const w = document.createElement("div");
      w.className = "word";
      w.style.left = (100 * ttfw / span) + "%";
      w.title = "first word at " + fwStages.ms(ttfw);
      track.appendChild(w);
    }
    return leaves.length;
  },
};
