// Markdown for model output, which is untrusted. marked parses it (the
// vendored copy in vendor/), with raw HTML shown as text and images as
// links; DOMPurify then sanitises marked's HTML (no style attributes, no
// scripts, frames, objects, forms or SVG, links only to http(s) and
// mailto); highlight.js colours fenced code (it emits class names only,
// which the strict CSP allows), and each code block gets a copy button.
"use strict";
window.fwMarkdown = (() => {
  const esc = (s) => String(s).replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;").replace(/"/g, "&quot;");
  const md = new marked.Marked({
    gfm: true,
    breaks: false,
    // Raw HTML in the model's text is not HTML: with no html or tag
    // tokens it is text, escaped like any other (and the Markdown around
    // it still renders).
    tokenizer: { html() { return undefined; }, tag() { return undefined; } },
    renderer: {
      html(tok) { return esc(tok.text); },
      // No remote images from model output: a link to it instead.
      image(tok) { return '<a href="' + esc(tok.href) + '">' + esc(tok.text || tok.href) + "</a>"; },
    },
  });
  const purify = DOMPurify();
  const config = {
    FORBID_TAGS: ["style", "script", "svg", "math", "iframe", "frame", "object", "embed", "form", "input", "button", "textarea", "select", "img", "video", "audio", "source", "link", "meta", "base"],
    FORBID_ATTR: ["style", "srcset", "action", "formaction"],
    ALLOW_DATA_ATTR: false,
    ALLOWED_URI_REGEXP: /^(?:https?:|mailto:)/i,
    RETURN_DOM_FRAGMENT: true,
  };
  purify.addHook("afterSanitizeAttributes", (node) => {
    if (node.nodeName === "A" && node.hasAttribute("href")) {
      node.setAttribute("rel", "noopener noreferrer nofollow");
      node.setAttribute("target", "_blank");
    }
  });

  function copyButton(pre) {
    const b = document.createElement("button");
    b.type = "button";
    b.className = "copy";
    b.setAttribute("aria-label", "Copy code");
    b.addEventListener("click", async () => {
      const text = pre.querySelector("code").textContent;
      let ok = false;
      try {
        await navigator.clipboard.writeText(text);
        ok = true;
      } catch {
        // Without clipboard permission: the old way, through a selection.
        const r = document.createRange();
        r.selectNodeContents(pre.querySelector("code"));
        const sel = getSelection();
        sel.removeAllRanges();
        sel.addRange(r);
        try { ok = document.execCommand("copy"); } catch { ok = false; }
        sel.removeAllRanges();
      }
      b.classList.toggle("copied", ok);
      b.dataset.copied = ok ? "1" : "0";
      setTimeout(() => { b.classList.remove("copied"); }, 1500);
    });
    return b;
  }

  // render replaces el's children with the rendered text.
  function render(el, text) {
    const frag = purify.sanitize(md.parse(text), config);
    // A link whose address was removed is just its text.
    for (const a of frag.querySelectorAll("a:not([href])")) a.replaceWith(...a.childNodes);
    for (const code of frag.querySelectorAll("pre > code")) {
      const m = /(?:^|\s)language-([\w+-]+)/.exec(code.className);
      const lang = m && hljs.getLanguage(m[1]) ? m[1] : "";
      if (lang) {
        // highlight.js escapes the code and adds <span class> only.
        const html = hljs.highlight(code.textContent, { language: lang, ignoreIllegals: true }).value;
        code.replaceChildren(purify.sanitize(html, config));
        code.dataset.lang = lang;
      }
      code.classList.add("hljs");
      const pre = code.parentNode;
      pre.classList.add("code");
      pre.appendChild(copyButton(pre));
    }
    el.replaceChildren(frag);
  }
  // Warm the libraries up at load, off screen: an answer's first words
  // are not the first text they ever see.
  render(document.createElement("div"), "*a* `b`\n\n| c |\n|---|\n| d |\n\n```js\nlet e = 1;\n```");
  return { render };
})();
