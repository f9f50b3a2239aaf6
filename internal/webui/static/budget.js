"use strict";
(() => {
  const $ = (id) => document.getElementById(id);
  const key = () => localStorage.getItem("fw-key") || "";
  let timer;

  async function load() {
    const surface = $("surface").value;
    const headers = key() ? { Authorization: "Bearer " + key() } : {};
    let resp;
    try {
      resp = await fetch("/v1/budget?recent=20&surface=" + encodeURIComponent(surface), { headers });
    } catch (e) {
      $("summary").textContent = "Cannot reach the gateway: " + e.message;
      return;
    }
    if (resp.status === 401) {
      $("keybox").hidden = false;
      $("summary").textContent = "This gateway requires an API key.";
      return;
    }
    const rep = await resp.json();
    render(rep);
    document.body.dataset.loaded = "1";
  }

  // cell adds a cell; label names its column, which a phone shows next to
  // the value (there the rows are cards and the header is hidden). The
  // roles keep the table a table for screen readers in that layout.
  function cell(tr, text, cls, label) {
    const td = document.createElement("td");
    td.textContent = text;
    if (cls) td.className = cls;
    if (label) td.dataset.label = label;
    td.setAttribute("role", label ? "cell" : "rowheader");
    tr.appendChild(td);
    return td;
  }

  function scale(row, max) {
    const d = document.createElement("div");
    d.className = "scale";
    if (!row.p50_ms) return d;
    const pct = (v) => Math.min(100, 100 * v / max) + "%";
    const rng = document.createElement("div");
    rng.className = "rng";
    rng.style.left = pct(row.p50_ms);
    rng.style.width = "calc(" + pct(row.p99_ms) + " - " + pct(row.p50_ms) + ")";
    const p50 = document.createElement("div");
    p50.className = "p50";
    p50.style.left = pct(row.p50_ms);
    d.append(rng, p50);
    if (row.target_ms) {
      const t = document.createElement("div");
      t.className = "tgt";
      t.style.left = pct(row.target_ms);
      t.title = "target p" + row.target_percentile + " " + fwStages.ms(row.target_ms);
      d.appendChild(t);
    }
    d.setAttribute("role", "img");
    d.setAttribute("aria-label", `p50 ${fwStages.ms(row.p50_ms)}, p99 ${fwStages.ms(row.p99_ms)}` + (row.target_ms ? `, target ${fwStages.ms(row.target_ms)}` : ""));
    return d;
  }

  function render(rep) {
    const win = Math.round(rep.window_seconds / 60);
    $("summary").textContent = `${rep.requests} requests in the last ${win} min · TTFW p50 ${fwStages.ms(rep.ttfw.p50_ms)}, p95 ${fwStages.ms(rep.ttfw.p95_ms)} · TTC p95 ${fwStages.ms(rep.ttc.p95_ms)}`;
    const tbody = $("stages").querySelector("tbody");
    tbody.replaceChildren();
    // A thinking model's rows, before the first word they are part of.
    const thought = rep.ttfthought && rep.ttfthought.count > 0
      ? [{ ...rep.ttfthought, name: "time to first thought", total: true }, { ...rep.thinking, name: "thinking", total: true }] : [];
    const rows = [...(rep.stages || []), ...thought, { ...rep.ttfw, name: "time to first word", total: true }, { ...rep.ttc, name: "time to complete", total: true }];
    const max = Math.max(1, ...rows.map(r => Math.max(r.p99_ms || 0, r.target_ms || 0)).filter(v => v < 1e7));
    for (const r of rows) {
      const tr = document.createElement("tr");
      tr.setAttribute("role", "row");
      if (r.total) tr.className = "total";
      if (r.over > 1) tr.classList.add("over");
      tr.dataset.stage = r.name;
      cell(tr, (r.group ? "▸ " : "") + r.name, r.group ? "name group" : "name");
      cell(tr, fwStages.ms(r.p50_ms), "", "p50");
      cell(tr, fwStages.ms(r.p95_ms), "", "p95");
      cell(tr, fwStages.ms(r.p99_ms), "", "p99");
      cell(tr, r.target_ms ? `p${r.target_percentile} ${fwStages.ms(r.target_ms)}${r.over > 1 ? " — over" : ""}` : "–", "target", "target");
      // The report caps the share at 1 (see #share-help); so does the page.
      const share = Math.min(1, r.share_of_ttfw || 0);
      cell(tr, !share ? "–" : share < 0.005 ? "<1%" : Math.round(100 * share) + "%", "share", "share of TTFW");
      const sc = document.createElement("td");
      sc.className = "scale-cell";
      sc.setAttribute("role", "cell");
      sc.appendChild(scale(r, max));
      tr.appendChild(sc);
      tbody.appendChild(tr);
    }
    $("critical").textContent = rep.critical_path ? `Critical path to the first word (${Math.round(100 * rep.critical_path_share)}% of requests): ${rep.critical_path}` : "";
    $("overspend").textContent = rep.most_over_budget ? `Most over budget: ${rep.most_over_budget}` : (rep.requests ? "Every stage with a target is within it." : "");

    const wf = $("waterfall");
    wf.replaceChildren();
    const recent = (rep.recent || []).slice().reverse();
    const span = Math.max(1, ...recent.map(r => Math.max(r.ttc_ms || 0, ...r.stages.map(s => s.end_ms))));
    for (const r of recent) {
      const row = document.createElement("div");
      row.className = "req";
      row.setAttribute("role", "listitem");
      // The label wraps onto a second line rather than being cut; the
      // tooltip has it on one line.
      const label = document.createElement("div");
      label.className = "label";
      const when = document.createElement("div");
      when.textContent = `${new Date(r.time).toLocaleTimeString()} · ${r.surface} · ${r.model}`;
      const how = document.createElement("div");
      how.className = "muted";
      how.textContent = `${r.status} · first word ${fwStages.ms(r.ttfw_ms)}`;
      label.append(when, how);
      label.title = when.textContent + " · " + how.textContent;
      const track = document.createElement("div");
      track.className = "track";
      fwStages.waterfall(track, r.stages, span, r.ttfw_ms);
      row.append(label, track);
      wf.appendChild(row);
    }
  }

  // loadAdvice shows the lever advisor's advice (GET /v1/budget/advice):
  // per alias, its levers by their saving at p95 of the time to complete,
  // with the config that turns each on.
  async function loadAdvice() {
    const headers = key() ? { Authorization: "Bearer " + key() } : {};
    let resp;
    try { resp = await fetch("/v1/budget/advice", { headers }); } catch { return; }
    if (!resp.ok) return;
    const { data } = await resp.json();
    const box = $("advice");
    if (!data || !data.length) {
      box.replaceChildren(el("p", "muted", "No advice yet: the advisor needs at least 20 requests of an alias."));
      return;
    }
    box.replaceChildren();
    const saves = (v) => (v >= 1 ? fwStages.ms(v) : "–");
    for (const a of data) {
      const sec = el("article", "alias-advice");
      sec.dataset.alias = a.alias;
      sec.appendChild(el("h3", "", `${a.alias} · ${a.requests} requests · first word p95 ${fwStages.ms(a.measured.ttfw_p95_ms)} · complete p95 ${fwStages.ms(a.measured.ttc_p95_ms)}`));
      const levers = (a.levers || []).slice().sort((x, y) => y.saving.ttc_p95_ms - x.saving.ttc_p95_ms);
      if (levers.length) {
        const table = el("table", "advice-table");
        const head = el("tr");
        for (const h of ["lever", "saves at p95: first word", "complete", "cost", "requests changed", "turn it on"]) head.appendChild(el("th", "", h));
        table.appendChild(head);
        for (const l of levers) {
          const tr = el("tr");
          tr.dataset.lever = l.lever;
          const name = el("td", "");
          name.appendChild(el("strong", "", l.title));
          name.appendChild(el("div", "muted small", l.detail));
          tr.append(name, el("td", "num", saves(l.saving.ttfw_p95_ms)), el("td", "num", saves(l.saving.ttc_p95_ms)),
            el("td", "num", Math.round(100 * l.saving.cost_share) + "%"), el("td", "num", String(l.affected)));
          const cfg = el("td", "");
          cfg.appendChild(el("pre", "config", l.config));
          tr.appendChild(cfg);
          table.appendChild(tr);
        }
        sec.appendChild(table);
      }
      sec.appendChild(el("p", "ranking", "First for the first word: " + ((a.by_ttfw || []).join(" › ") || "none saves a millisecond")));
      sec.appendChild(el("p", "ranking", "First for the whole answer: " + ((a.by_ttc || []).join(" › ") || "none saves a millisecond")));
      for (const n of a.notes || []) sec.appendChild(el("p", "muted small", n));
      box.appendChild(sec);
    }
  }

  function el(tag, cls, text) {
    const e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  $("surface").addEventListener("change", load);
  $("savekey").addEventListener("click", () => {
    localStorage.setItem("fw-key", $("key").value.trim());
    $("keybox").hidden = true;
    load();
    loadAdvice();
  });
  load();
  loadAdvice();
  timer = setInterval(load, 2000);
  setInterval(loadAdvice, 10000);
})();
