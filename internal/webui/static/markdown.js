// A small, safe Markdown renderer for model output, which is untrusted:
// it builds DOM nodes and sets only textContent, so no string from the
// model is ever parsed as HTML. Supported: paragraphs, headings, fenced
// code blocks, inline code, bold, italics, lists, quotes and http(s) links.
"use strict";
window.fwMarkdown = (() => {
  function inline(parent, text) {
    // Tokens: `code`, **bold**, *italic* or _italic_, [text](url).
    const re = /(`[^`\n]+`)|(\*\*[^*\n]+\*\*)|(\*[^*\n]+\*|_[^_\n]+_)|(\[[^\]\n]+\]\((https?:\/\/[^\s)]+)\))/g;
    let last = 0, m;
    while ((m = re.exec(text)) !== null) {
      if (m.index > last) parent.appendChild(document.createTextNode(text.slice(last, m.index)));
      let el;
      if (m[1]) { el = document.createElement("code"); el.textContent = m[1].slice(1, -1); }
      else if (m[2]) { el = document.createElement("strong"); inline(el, m[2].slice(2, -2)); }
      else if (m[3]) { el = document.createElement("em"); inline(el, m[3].slice(1, -1)); }
      else {
        el = document.createElement("a");
        el.textContent = m[4].slice(1, m[4].indexOf("]("));
        el.href = m[5];
        el.rel = "noopener noreferrer nofollow";
        el.target = "_blank";
      }
      parent.appendChild(el);
      last = re.lastIndex;
    }
    if (last < text.length) parent.appendChild(document.createTextNode(text.slice(last)));
  }

  // render replaces el's children with the rendered text.
  function render(el, text) {
    const frag = document.createDocumentFragment();
    const lines = text.split("\n");
    let i = 0, para = [];
    const flush = () => {
      if (para.length) {
        const p = document.createElement("p");
        inline(p, para.join("\n"));
        frag.appendChild(p);
        para = [];
      }
    };
    while (i < lines.length) {
      const line = lines[i];
      const fence = line.match(/^```\s*([\w+-]*)\s*$/);
      if (fence) {
        flush();
        const code = [];
        i++;
        while (i < lines.length && !/^```\s*$/.test(lines[i])) code.push(lines[i++]);
        i++; // closing fence (or end of a still-streaming block)
        const pre = document.createElement("pre");
        const c = document.createElement("code");
        if (fence[1]) c.dataset.lang = fence[1];
        c.textContent = code.join("\n");
        pre.appendChild(c);
        frag.appendChild(pre);
        continue;
      }
      const h = line.match(/^(#{1,4})\s+(.*)$/);
      if (h) {
        flush();
        const el = document.createElement("h" + Math.min(6, h[1].length + 2));
        inline(el, h[2]);
        frag.appendChild(el);
        i++;
        continue;
      }
      const li = line.match(/^\s*([-*]|\d+[.)])\s+(.*)$/);
      if (li) {
        flush();
        const list = document.createElement(/\d/.test(li[1]) ? "ol" : "ul");
        while (i < lines.length) {
          const m = lines[i].match(/^\s*([-*]|\d+[.)])\s+(.*)$/);
          if (!m) break;
          const item = document.createElement("li");
          inline(item, m[2]);
          list.appendChild(item);
          i++;
        }
        frag.appendChild(list);
        continue;
      }
      if (/^>\s?/.test(line)) {
        flush();
        const q = document.createElement("blockquote");
        const quoted = [];
        while (i < lines.length && /^>\s?/.test(lines[i])) quoted.push(lines[i++].replace(/^>\s?/, ""));
        inline(q, quoted.join("\n"));
        frag.appendChild(q);
        continue;
      }
      if (line.trim() === "") { flush(); i++; continue; }
      para.push(line);
      i++;
    }
    flush();
    el.replaceChildren(frag);
  }
  return { render };
})();
