// Page -> observation, run inside the page by `observation.observe`.
//
// One walk over the DOM does three jobs:
//   1. it numbers every visible interactive element by writing a data-webr1-id
//      attribute on it, so an action can find the element again by that id
//      (ids are kept for the life of the document, so past turns stay meaningful);
//   2. it renders the page as the paper's simplified HTML, or as an
//      accessibility-tree text with the same ids;
//   3. it returns a structured list of the numbered elements (role, name, value,
//      box) that scripted experts and replays use.
// Everything the page says is treated as text here: nothing is evaluated.
(opts) => {
  const ID_ATTR = "data-webr1-id";
  const viewportOnly = !!opts.viewportOnly;
  const format = opts.format || "html";
  const maxText = opts.maxTextPerNode || 400;
  const W = window.innerWidth, H = window.innerHeight;

  const SKIP = new Set(["script", "style", "noscript", "template", "meta", "link", "head", "title", "base", "iframe", "object", "embed"]);
  // Non-interactive tags worth keeping for structure; everything else is unwrapped.
  const KEEP = new Set(["h1", "h2", "h3", "h4", "h5", "h6", "p", "ul", "ol", "li", "table", "tr", "td", "th",
    "form", "label", "nav", "img", "dl", "dt", "dd", "blockquote", "pre", "fieldset", "legend", "caption", "main", "header", "footer", "aside"]);
  const INTERACTIVE_TAGS = new Set(["a", "button", "input", "select", "textarea", "summary"]);
  const INTERACTIVE_ROLES = new Set(["button", "link", "checkbox", "radio", "tab", "menuitem", "menuitemcheckbox",
    "menuitemradio", "option", "switch", "textbox", "combobox", "listbox", "slider", "spinbutton", "treeitem", "searchbox"]);
  const ROLE_OF = {a: "link", button: "button", select: "combobox", textarea: "textbox", h1: "heading", h2: "heading",
    h3: "heading", h4: "heading", h5: "heading", h6: "heading", img: "img", ul: "list", ol: "list", li: "listitem",
    table: "table", tr: "row", td: "cell", th: "columnheader", p: "paragraph", form: "form", nav: "navigation",
    label: "LabelText", summary: "button", dl: "list", dt: "term", dd: "definition", blockquote: "blockquote",
    pre: "code", fieldset: "group", legend: "legend", caption: "caption", main: "main", header: "banner",
    footer: "contentinfo", aside: "complementary"};
  const INPUT_ROLE = {checkbox: "checkbox", radio: "radio", button: "button", submit: "button", reset: "button",
    image: "button", range: "slider", number: "spinbutton", search: "searchbox", email: "textbox", tel: "textbox",
    url: "textbox", text: "textbox", password: "textbox", date: "textbox", time: "textbox", "datetime-local": "textbox",
    month: "textbox", week: "textbox", color: "button", file: "button"};

  const clean = (s) => (s || "").replace(/\s+/g, " ").trim();
  const cut = (s, n) => (s.length > n ? s.slice(0, n - 1) + "…" : s);
  const escText = (s) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/>/g, "&gt;");
  const escAttr = (s) => escText(s).replace(/"/g, "&quot;");
  const inView = (r) => r.width > 0 && r.height > 0 && r.bottom > 0 && r.right > 0 && r.top < H && r.left < W;

  // Ids already used in this document, so clones of a tagged element get a fresh id.
  const used = new Set();
  let next = window.__webr1NextId || 1;

  function isInteractive(el, tag, style) {
    if (INTERACTIVE_TAGS.has(tag)) {
      if (tag === "input" && (el.type || "").toLowerCase() === "hidden") return false;
      if (tag === "a" && !el.hasAttribute("href") && !el.hasAttribute("onclick") && style.cursor !== "pointer") return false;
      return true;
    }
    const role = (el.getAttribute("role") || "").toLowerCase();
    if (INTERACTIVE_ROLES.has(role)) return true;
    if (el.hasAttribute("onclick") || typeof el.onclick === "function") return true;
    if (el.isContentEditable && !(el.parentElement && el.parentElement.isContentEditable)) return true;
    const tabindex = el.getAttribute("tabindex");
    if (tabindex !== null && parseInt(tabindex, 10) >= 0) return true;
    // Handlers added with addEventListener are invisible to the DOM; a pointer
    // cursor that does not merely inherit from the parent is the usual sign of one.
    if (style.cursor === "pointer") {
      const parent = el.parentElement;
      if (!parent || getComputedStyle(parent).cursor !== "pointer") return true;
    }
    return false;
  }

  function roleOf(el, tag) {
    const explicit = el.getAttribute("role");
    if (explicit) return explicit.toLowerCase();
    if (tag === "input") return INPUT_ROLE[(el.type || "text").toLowerCase()] || "textbox";
    return ROLE_OF[tag] || "generic";
  }

  function labelText(el) {
    if (el.labels && el.labels.length) return clean(Array.from(el.labels).map((l) => l.innerText).join(" "));
    return "";
  }

  function nameOf(el, tag) {
    const aria = el.getAttribute("aria-label");
    if (aria) return clean(aria);
    const by = el.getAttribute("aria-labelledby");
    if (by) {
      const t = by.split(/\s+/).map((i) => document.getElementById(i)).filter(Boolean).map((n) => n.innerText).join(" ");
      if (clean(t)) return clean(t);
    }
    if (tag === "input" || tag === "textarea" || tag === "select") {
      const lt = labelText(el);
      if (lt) return lt;
      const type = (el.type || "").toLowerCase();
      if (["submit", "button", "reset"].includes(type)) return clean(el.value);
      return clean(el.getAttribute("placeholder") || el.getAttribute("title") || el.getAttribute("name") || "");
    }
    if (tag === "img") return clean(el.getAttribute("alt") || el.getAttribute("title") || "");
    return clean(el.innerText || el.textContent || el.getAttribute("title") || "");
  }

  function textVisible(node, parentRect) {
    if (!viewportOnly) return true;
    if (parentRect.top >= 0 && parentRect.bottom <= H && parentRect.left >= 0 && parentRect.right <= W) return true;
    const range = document.createRange();
    range.selectNodeContents(node);
    for (const r of range.getClientRects()) if (inView(r)) return true;
    return false;
  }

  const elements = [];

  // Returns a list of output nodes: {kind: "text", text} or {kind: "el", ...}.
  // Empty leaves (no text, no child elements) with a visible box are the targets of
  // visual tasks: coloured squares, SVG shapes, board cells. They get ids too, unless
  // an interactive ancestor already covers them (icons inside buttons).
  const NOT_LEAF_TARGET = new Set(["br", "hr", "wbr", "img", "svg", "html", "body"]);
  function isEmptyLeafTarget(el, tag, rect) {
    if (NOT_LEAF_TARGET.has(tag) || el.children.length) return false;
    if (clean(el.textContent)) return false;
    return rect.width * rect.height >= 16;
  }

  function walk(node, parentHidden, parentRect, inInteractive) {
    if (node.nodeType === Node.TEXT_NODE) {
      if (parentHidden) return [];
      const t = clean(node.data);
      if (!t || !textVisible(node, parentRect)) return [];
      return [{kind: "text", text: cut(t, maxText)}];
    }
    if (node.nodeType !== Node.ELEMENT_NODE) return [];
    const el = node;
    const tag = el.tagName.toLowerCase();
    if (SKIP.has(tag)) return [];
    if (opts.exclude && el.matches(opts.exclude)) return [];
    const style = getComputedStyle(el);
    if (style.display === "none" || el.getAttribute("aria-hidden") === "true") return [];
    const hidden = style.visibility === "hidden" || style.visibility === "collapse";
    const rect = el.getBoundingClientRect();
    const hasBox = rect.width > 0 && rect.height > 0;
    if (viewportOnly && hasBox && !inView(rect) && style.position !== "fixed" && tag !== "body" && tag !== "html") return [];

    const interactive = !hidden && hasBox && (isInteractive(el, tag, style) || (!inInteractive && isEmptyLeafTarget(el, tag, rect)));
    let children = [];
    if (tag === "select") {
      // Options of a closed dropdown have no box; list them all so the agent can choose.
      children = Array.from(el.options).map((o) => ({kind: "option", text: cut(clean(o.text), maxText), selected: o.selected}));
    } else if (tag !== "textarea") {
      for (const child of el.childNodes) children.push(...walk(child, hidden, hasBox ? rect : parentRect, inInteractive || interactive));
    }

    if (interactive) {
      let id = parseInt(el.getAttribute(ID_ATTR) || "", 10);
      if (!(id > 0) || used.has(id)) {
        id = next++;
        el.setAttribute(ID_ATTR, String(id));
      }
      if (id >= next) next = id + 1;
      used.add(id);
      const attrs = [];
      const type = tag === "input" || tag === "button" ? (el.getAttribute("type") || "").toLowerCase() : "";
      if (type) attrs.push(["type", type]);
      const explicitRole = el.getAttribute("role");
      if (explicitRole) attrs.push(["role", explicitRole]);
      for (const a of ["title", "placeholder", "aria-label", "alt"]) {
        const v = el.getAttribute(a);
        if (v) attrs.push([a, cut(clean(v), 120)]);
      }
      let value = null, checked = null;
      if (tag === "input" && (type === "checkbox" || type === "radio")) {
        checked = !!el.checked;
      } else if (tag === "input" || tag === "textarea") {
        value = el.value;
        if (value) attrs.push(["value", cut(value, 200)]);
      } else if (tag === "select") {
        const sel = el.options[el.selectedIndex];
        value = sel ? clean(sel.text) : "";
      }
      const flags = [];
      if (checked) flags.push("checked");
      if (el.disabled) flags.push("disabled");
      const name = cut(nameOf(el, tag), 200);
      const rec = {id, tag, role: roleOf(el, tag), name, type, value, checked, disabled: !!el.disabled,
        focused: document.activeElement === el,
        box: [Math.round(rect.left), Math.round(rect.top), Math.round(rect.width), Math.round(rect.height)]};
      if (tag === "select") rec.options = Array.from(el.options).map((o) => clean(o.text));
      elements.push(rec);
      return [{kind: "el", tag, id, attrs, flags, children, role: rec.role, name, value}];
    }
    if (hidden) return children;
    if (KEEP.has(tag)) {
      if (tag === "img") {
        const alt = clean(el.getAttribute("alt") || "");
        return alt && hasBox ? [{kind: "el", tag, attrs: [["alt", cut(alt, 120)]], flags: [], children: [], role: "img", name: alt}] : [];
      }
      if (!children.length) return [];
      return [{kind: "el", tag, attrs: [], flags: [], children, role: roleOf(el, tag), name: ""}];
    }
    return children;
  }

  const tree = walk(document.body || document.documentElement, false, {top: 0, bottom: H, left: 0, right: W}, false);
  window.__webr1NextId = next;

  // ---- simplified HTML -------------------------------------------------------
  const lines = [];
  const onlyText = (n) => n.children.every((c) => c.kind === "text");
  function attrText(n) {
    let s = n.id ? ` id="${n.id}"` : "";
    for (const [k, v] of n.attrs) s += ` ${k}="${escAttr(v)}"`;
    for (const f of n.flags) s += ` ${f}`;
    return s;
  }
  function html(n) {
    if (n.kind === "text") { lines.push(escText(n.text)); return; }
    if (n.kind === "option") { lines.push(`<option${n.selected ? " selected" : ""}>${escText(n.text)}</option>`); return; }
    const open = `<${n.tag}${attrText(n)}`;
    if (n.tag === "select") {
      lines.push(open + ">");
      n.children.forEach(html);
      lines.push("</select>");
    } else if (onlyText(n)) {
      const text = cut(clean(n.children.map((c) => c.text).join(" ")), maxText);
      if (n.id !== undefined) lines.push(text ? `${open} data-text="${escAttr(text)}">` : `${open}>`);
      else lines.push(`${open}>${escText(text)}</${n.tag}>`);
    } else {
      lines.push(open + ">");
      n.children.forEach(html);
      lines.push(`</${n.tag}>`);
    }
  }

  // ---- accessibility-tree text ----------------------------------------------
  const q = (s) => "'" + s.replace(/'/g, "\\'") + "'";
  function ax(n, depth) {
    const pad = "  ".repeat(depth);
    if (n.kind === "text") { lines.push(`${pad}StaticText ${q(n.text)}`); return; }
    if (n.kind === "option") { lines.push(`${pad}option ${q(n.text)}${n.selected ? " selected" : ""}`); return; }
    let head = n.id !== undefined ? `[${n.id}] ${n.role}` : n.role;
    let name = n.name;
    const textKids = onlyText(n) && n.children.length;
    if (!name && textKids) name = cut(clean(n.children.map((c) => c.text).join(" ")), maxText);
    if (name) head += ` ${q(name)}`;
    if (n.value && n.tag !== "select") head += ` value=${q(cut(n.value, 200))}`;
    for (const f of n.flags) head += ` ${f}`;
    lines.push(pad + head);
    if (n.tag === "select" || !textKids || (n.id === undefined && n.name)) n.children.forEach((c) => ax(c, depth + 1));
  }

  tree.forEach(format === "axtree" ? (n) => ax(n, 0) : html);
  const se = document.scrollingElement || document.documentElement;
  return {
    text: lines.join("\n"),
    elements,
    scroll: {y: Math.round(se.scrollTop), height: Math.round(se.scrollHeight), viewport: H},
  };
}
