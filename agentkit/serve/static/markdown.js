// agentkit web chat: a small markdown renderer that builds DOM nodes only.
// Model text is hostile. This file never turns text into HTML: every node is made with
// createElement and every piece of text goes in through a text node, so no markup in the
// text can become an element or an attribute (inert by construction, no sanitizer needed).
// Only http(s) and mailto links become <a>; images are shown as links (never loaded).
"use strict";

const MD = (() => {
  const FENCE = /^ {0,3}(`{3,}|~{3,})\s*([^`\s]*)[^`]*$/;
  const HEADING = /^ {0,3}(#{1,6})(?:[ \t]+(.*?))?(?:[ \t]+#+)?[ \t]*$/;
  const HR = /^ {0,3}([-*_])(?:[ \t]*\1){2,}[ \t]*$/;
  const QUOTE = /^ {0,3}> ?/;
  const ITEM = /^( *)([-*+]|\d{1,9}[.)])(?:( +)(.*))?$/;
  const DELIM = /^ *\|? *:?-+:? *(\| *:?-+:? *)*\|? *$/;
  const SAFE_URL = /^(https?:\/\/|mailto:)/i;
  const BLANK = /^\s*$/;

  function h(tag, cls) {
    const node = document.createElement(tag);
    if (cls) node.className = cls;
    return node;
  }

  function isItem(line) {
    const m = ITEM.exec(line);
    return m !== null && (m[3] !== undefined || m[4] === undefined);
  }

  function tableStart(lines, i) {
    return i + 1 < lines.length && lines[i].includes("|") && DELIM.test(lines[i + 1]) &&
      lines[i + 1].includes("-");
  }

  // Does `line` begin a block that ends the paragraph (or list) before it?
  function interrupts(lines, i) {
    const line = lines[i];
    return FENCE.test(line) || HEADING.test(line) || HR.test(line) || QUOTE.test(line) ||
      tableStart(lines, i);
  }

  // Cut `lines` into top-level blocks: [{type, start, end}] (end exclusive); blank lines
  // after a block belong to it, so the blocks tile the lines.
  function scan(lines) {
    const blocks = [];
    let i = 0;
    while (i < lines.length) {
      const start = i;
      const line = lines[i];
      let type;
      let fence;
      if (BLANK.test(line)) {
        type = "blank";
        i++;
      } else if ((fence = FENCE.exec(line))) {
        type = "code";
        const mark = fence[1];
        i++;
        while (i < lines.length) {
          i++;
          if (closing(lines[i - 1], mark)) break;
        }
      } else if (HEADING.test(line) || HR.test(line)) {
        type = HEADING.test(line) ? "heading" : "hr";
        i++;
      } else if (QUOTE.test(line)) {
        type = "quote";
        while (i < lines.length && QUOTE.test(lines[i])) i++;
      } else if (isItem(line)) {
        type = "list";
        i++;
        while (i < lines.length) {
          const next = lines[i];
          if (BLANK.test(next)) {
            let j = i;
            while (j < lines.length && BLANK.test(lines[j])) j++;
            if (j < lines.length && (isItem(lines[j]) || /^ {2,}\S/.test(lines[j]))) { i = j; continue; }
            break;
          }
          if (!isItem(next) && !/^ {2,}/.test(next) && interrupts(lines, i)) break;
          i++;
        }
      } else if (tableStart(lines, i)) {
        type = "table";
        i += 2;
        while (i < lines.length && !BLANK.test(lines[i]) && lines[i].includes("|")) i++;
      } else {
        type = "para";
        i++;
        while (i < lines.length && !BLANK.test(lines[i]) && !interrupts(lines, i) &&
               !isItem(lines[i]) && !tableStart(lines, i)) i++;
        // A table's header row may follow paragraph text directly: it is not part of it.
      }
      while (type !== "blank" && type !== "code" && i < lines.length && BLANK.test(lines[i]) &&
             type !== "list") i++;
      if (type === "blank" && blocks.length) blocks[blocks.length - 1].end = i;
      else blocks.push({ type, start, end: i });
    }
    return blocks;
  }

  // ------------------------------------------------------------------ inline
  function safeLink(url, parent) {
    const a = h("a");
    a.setAttribute("href", url);
    a.setAttribute("rel", "noopener noreferrer");
    a.setAttribute("target", "_blank");
    parent.appendChild(a);
    return a;
  }

  // Where the `[` at `open` closes, with its (url) after it: [labelEnd, urlEnd, url] or null.
  function linkAt(s, open) {
    let depth = 0;
    let k = open;
    for (; k < s.length; k++) {
      const c = s[k];
      if (c === "\\") { k++; continue; }
      if (c === "[") depth++;
      else if (c === "]" && --depth === 0) break;
    }
    if (k >= s.length || s[k + 1] !== "(") return null;
    let m = k + 2;
    let parens = 0;
    for (; m < s.length; m++) {
      const c = s[m];
      if (c === "(") parens++;
      else if (c === ")") { if (parens === 0) break; parens--; }
      else if (c === "\n") return null;
    }
    if (m >= s.length) return null;
    const target = s.slice(k + 2, m).trim();
    const url = target.replace(/\s+("[^"]*"|'[^']*')$/, "").replace(/^<(.*)>$/, "$1");
    return [k, m, url];
  }

  function inline(s, parent) {
    let text = "";
    const flush = () => { if (text) { parent.appendChild(document.createTextNode(text)); text = ""; } };
    let i = 0;
    while (i < s.length) {
      const c = s[i];
      if (c === "\\" && i + 1 < s.length && /[!-/:-@[-`{-~]/.test(s[i + 1])) {
        text += s[i + 1]; i += 2; continue;
      }
      if (c === "\\" && s[i + 1] === "\n") { flush(); parent.appendChild(h("br")); i += 2; continue; }
      if (c === "`") {
        let n = 1;
        while (s[i + n] === "`") n++;
        const fence = s.slice(i, i + n);
        const end = s.indexOf(fence, i + n);
        if (end > 0 && s[end + n] !== "`") {
          flush();
          const code = h("code");
          code.textContent = s.slice(i + n, end).replace(/^ (.*) $/, "$1");
          parent.appendChild(code);
          i = end + n;
          continue;
        }
        text += fence; i += n; continue;
      }
      const image = c === "!" && s[i + 1] === "[";
      if (c === "[" || image) {
        const open = image ? i + 1 : i;
        const link = linkAt(s, open);
        if (link) {
          const [labelEnd, urlEnd, url] = link;
          if (SAFE_URL.test(url)) {
            flush();
            const a = safeLink(url, parent);
            if (image) a.className = "image-link";
            inline((image ? "image: " : "") + s.slice(open + 1, labelEnd), a);
          } else {
            text += s.slice(i, urlEnd + 1);   // an unsafe target stays text, whole
          }
          i = urlEnd + 1;
          continue;
        }
      }
      if (c === "<") {
        const auto = /^<([a-z][a-z0-9+.-]{1,31}:[^\s<>]*)>/i.exec(s.slice(i, i + 2048));
        if (auto && SAFE_URL.test(auto[1])) {
          flush();
          safeLink(auto[1], parent).textContent = auto[1].replace(/^mailto:/i, "");
          i += auto[0].length;
          continue;
        }
      }
      if ((c === "h" || c === "H") && (i === 0 || /[\s(]/.test(s[i - 1]))) {
        const bare = /^https?:\/\/[^\s<>()]+[^\s<>().,;:!?'"*_~]/i.exec(s.slice(i, i + 2048));
        if (bare) {
          flush();
          safeLink(bare[0], parent).textContent = bare[0];
          i += bare[0].length;
          continue;
        }
      }
      if (c === "*" || c === "_" || c === "~") {
        const n = s[i + 1] === c ? 2 : 1;
        const mark = s.slice(i, i + n);
        const wordBefore = i > 0 && /[\p{L}\p{N}]/u.test(s[i - 1]);
        const opens = s[i + n] !== undefined && !/\s/.test(s[i + n]) && !(c === "_" && wordBefore) &&
                      !(c === "~" && n === 1);
        if (opens) {
          let end = i + n;
          for (;;) {
            end = s.indexOf(mark, end + 1);
            if (end < 0) break;
            const closes = !/\s/.test(s[end - 1]) && s[end + n] !== c &&
                           !(c === "_" && /[\p{L}\p{N}]/u.test(s[end + n] || ""));
            if (closes) break;
          }
          if (end > i + n) {
            flush();
            const tag = c === "~" ? "del" : n === 2 ? "strong" : "em";
            const node = h(tag);
            inline(s.slice(i + n, end), node);
            parent.appendChild(node);
            i = end + n;
            continue;
          }
        }
        text += mark; i += n; continue;
      }
      if (c === "\n" && / {2,}$/.test(text)) {
        text = text.replace(/ +$/, ""); flush(); parent.appendChild(h("br")); i++; continue;
      }
      text += c; i++;
    }
    flush();
  }

  // ------------------------------------------------------------------ blocks
  function codeBlock(info) {
    const wrap = h("div", "code-block");
    const bar = h("div", "code-bar");
    const lang = (info || "").replace(/[^\w+#-]/g, "").slice(0, 32);
    const label = h("span", "code-lang");
    label.textContent = lang || "code";
    const copy = h("button", "copy");
    copy.type = "button";
    copy.textContent = "Copy";
    copy.setAttribute("aria-label", "Copy code");
    copy.dataset.testid = "copy";
    bar.append(label, copy);
    const pre = h("pre");
    pre.tabIndex = 0;   // scrollable: reachable by keyboard
    const code = h("code", lang ? "language-" + lang : "");
    pre.appendChild(code);
    wrap.append(bar, pre);
    return { wrap, code };
  }

  function cells(line) {
    let row = line.trim();
    if (row.startsWith("|")) row = row.slice(1);
    if (row.endsWith("|") && !row.endsWith("\\|")) row = row.slice(0, -1);
    return row.split(/(?<!\\)\|/).map((c) => c.trim().replace(/\\\|/g, "|"));
  }

  function table(lines) {
    const wrap = h("div", "table-wrap");
    wrap.tabIndex = 0;
    const tab = h("table");
    const align = cells(lines[1]).map((c) =>
      c.startsWith(":") && c.endsWith(":") ? "center" : c.endsWith(":") ? "right" : "");
    const head = cells(lines[0]);
    const row = (values, tag) => {
      const tr = h("tr");
      for (let k = 0; k < head.length; k++) {
        const cell = h(tag, align[k] ? "align-" + align[k] : "");
        if (tag === "th") cell.setAttribute("scope", "col");
        inline(values[k] || "", cell);
        tr.appendChild(cell);
      }
      return tr;
    };
    const thead = h("thead");
    thead.appendChild(row(head, "th"));
    const tbody = h("tbody");
    for (const line of lines.slice(2)) if (!BLANK.test(line)) tbody.appendChild(row(cells(line), "td"));
    tab.append(thead, tbody);
    wrap.appendChild(tab);
    return wrap;
  }

  function list(lines) {
    const lists = [];
    let current = null;
    let item = null;
    let body = [];
    let col = 0;          // the content column of the current item
    let loose = false;
    let sawBlank = false;
    const close = () => {
      if (!item) return;
      while (body.length && BLANK.test(body[body.length - 1])) body.pop();
      blocks(body, item);
    };
    for (const line of lines) {
      const m = isItem(line) ? ITEM.exec(line) : null;
      if (m && (item === null || m[1].length < col)) {   // the next item of this list
        close();
        if (sawBlank) loose = true;
        sawBlank = false;
        const ordered = /\d/.test(m[2]);
        if (!current || current.ordered !== ordered) {
          current = { node: h(ordered ? "ol" : "ul"), ordered };
          const start = parseInt(m[2], 10);
          if (ordered && start !== 1) current.node.setAttribute("start", String(start));
          lists.push(current);
        }
        item = h("li");
        current.node.appendChild(item);
        col = m[1].length + m[2].length + (m[3] ? Math.min(m[3].length, 4) : 1);
        body = [m[4] || ""];
      } else if (BLANK.test(line)) {
        sawBlank = true;
        body.push("");
      } else {                                           // the item's own text, or a nested list
        sawBlank = false;
        const lead = /^ */.exec(line)[0].length;
        body.push(line.slice(Math.min(lead, col)));
      }
    }
    close();
    if (!loose) {   // a tight list: items hold their text directly, not in paragraphs
      for (const l of lists) for (const li of l.node.children) {
        for (const p of Array.from(li.children)) if (p.tagName === "P") p.replaceWith(...p.childNodes);
      }
    }
    return lists.map((l) => l.node);
  }

  function block(b, lines) {
    const part = lines.slice(b.start, b.end);
    switch (b.type) {
      case "code": {
        const open = FENCE.exec(part[0]);
        let body = part.slice(1);
        let last = body.length - 1;
        while (last >= 0 && BLANK.test(body[last])) last--;
        if (last >= 0 && closing(body[last], open[1])) body = body.slice(0, last);
        const { wrap, code } = codeBlock(open[2]);
        code.textContent = body.join("\n");
        return [wrap];
      }
      case "heading": {
        const m = HEADING.exec(part[0]);
        const node = h("h" + Math.min(6, m[1].length + 2));   // the page's own h1 comes first
        node.className = "md-h" + m[1].length;
        inline(m[2] || "", node);
        return [node];
      }
      case "hr": return [h("hr")];
      case "quote": {
        const node = h("blockquote");
        blocks(part.filter((l) => !BLANK.test(l)).map((l) => l.replace(QUOTE, "")), node);
        return [node];
      }
      case "list": return list(part);
      case "table": return [table(part)];
      default: {
        const node = h("p");
        inline(part.filter((l) => !BLANK.test(l)).map((l) => l.replace(/^ {1,3}/, "")).join("\n"), node);
        return [node];
      }
    }
  }

  function blocks(lines, parent) {
    for (const b of scan(lines)) for (const node of block(b, lines)) parent.appendChild(node);
  }

  // ------------------------------------------------------------------ streaming
  // One message's text, rendered as it streams. Blocks before the last are final: their DOM
  // is kept and never rebuilt; each render rebuilds only the last (open) block, and an open
  // fenced code block is only appended to. So a render costs O(the open block + new text).
  class Stream {
    constructor(container) {
      this.root = container;
      this.src = "";
      this.done = 0;        // src[0:done] is rendered in final blocks
      this.tail = [];       // the DOM nodes of the open block
      this.code = null;     // fast path for an open fenced code block at `done`
    }

    append(delta) { this.src += delta; }

    render(final) {
      this.final = final;
      if (this.code && !final && this.appendCode()) return;
      this.code = null;
      for (const node of this.tail) node.remove();
      this.tail = [];
      const region = this.src.slice(this.done);
      const cut = final ? region.length : region.lastIndexOf("\n") + 1;
      if (cut > 0) {
        const lines = region.slice(0, cut).split("\n");
        if (!final) lines.pop();   // the text after the last newline: the "" line
        const found = scan(lines);
        const keep = final ? found.length : found.length - 1;
        let offset = 0;
        for (let k = 0; k < keep; k++) {
          for (const node of block(found[k], lines)) this.root.appendChild(node);
          for (let l = found[k].start; l < found[k].end; l++) offset += lines[l].length + 1;
        }
        this.done += Math.min(offset, region.length);
        if (final) return;
      }
      const open = this.src.slice(this.done);
      const lines = open.split("\n");
      for (const b of scan(lines)) {
        for (const node of block(b, lines)) { this.root.appendChild(node); this.tail.push(node); }
      }
      const fence = FENCE.exec(lines[0]);
      if (fence && this.tail.length === 1 && lines.length > 1) {
        const body = open.slice(lines[0].length + 1);
        const cutAt = body.lastIndexOf("\n") + 1;
        const closed = body.slice(0, cutAt).split("\n").some((l) => closing(l, fence[1]));
        if (!closed) {
          const code = this.tail[0].querySelector("code");
          const fixed = document.createTextNode(body.slice(0, cutAt));
          const partial = document.createTextNode(body.slice(cutAt));
          code.replaceChildren(fixed, partial);
          this.code = { fixed, partial, mark: fence[1], scanned: this.src.length - body.length + cutAt };
        }
      }
    }

    // Append the new complete lines of an open code block; false once its fence closes.
    appendCode() {
      const c = this.code;
      const fresh = this.src.slice(c.scanned);
      const cutAt = fresh.lastIndexOf("\n") + 1;
      const complete = fresh.slice(0, cutAt);
      if (complete.split("\n").some((l) => closing(l, c.mark))) return false;
      if (complete) c.fixed.appendData(complete);
      c.scanned += cutAt;
      c.partial.data = fresh.slice(cutAt);
      return true;
    }
  }

  function closing(line, mark) {
    const close = /^ {0,3}(`{3,}|~{3,})\s*$/.exec(line);
    return close !== null && close[1][0] === mark[0] && close[1].length >= mark.length;
  }

  return { Stream, render: (text, parent) => { const s = new Stream(parent); s.append(text); s.render(true); } };
})();
