// ocrserve viewer: uploads a document to POST /v1/convert?stream=true and draws the Server-Sent Events
// as they arrive: page_started (page image), block (a layout box + its rendered HTML), page_done, done, error.
"use strict";

const COLORS = {
  "Section-Header": "#d9480f", "Title": "#c2255c", "Text": "#1c7ed6", "Table": "#2b8a3e", "Image": "#7048e8",
  "Figure": "#7048e8", "Picture": "#7048e8", "Caption": "#e67700", "Page-Header": "#868e96", "Page-Footer": "#868e96",
  "List-Group": "#0c8599", "Equation-Block": "#ae3ec9", "Form": "#5c940d", "Code-Block": "#364fc7",
  "Footnote": "#a61e4d", "Table-Of-Contents": "#087f5b", "Complex-Block": "#495057", "Diagram": "#6741d9",
  "Bibliography": "#e8590c", "Blank-Page": "#adb5bd",
};

function colorFor(label) {
  if (COLORS[label]) return COLORS[label];
  let h = 0;
  for (const ch of label) h = (h * 31 + ch.charCodeAt(0)) % 360;
  return `hsl(${h}, 65%, 42%)`;
}

const $ = (sel) => document.querySelector(sel);
const state = { pages: new Map(), labels: new Set(), key: "", file: null, formats: [] };

function setStatus(text, error = false) {
  const el = $("#status");
  el.textContent = text;
  el.classList.toggle("error", error);
}

function addLegend(label) {
  if (state.labels.has(label)) return;
  state.labels.add(label);
  const s = document.createElement("span");
  s.textContent = label;
  s.style.background = colorFor(label);
  s.dataset.label = label;
  $("#legend").appendChild(s);
}

function pageView(index) {
  let v = state.pages.get(index);
  if (v) return v;
  const root = document.createElement("section");
  root.className = "page";
  root.dataset.page = String(index);
  const title = document.createElement("h2");
  title.innerHTML = `Page ${index + 1}<span class="state">converting…</span>`;
  const sheet = document.createElement("div");
  sheet.className = "sheet";
  const output = document.createElement("div");
  output.className = "output";
  root.append(title, sheet, output);
  // keep pages in page order whatever order they start in
  const after = [...$("#pages").children].find((el) => Number(el.dataset.page) > index);
  $("#pages").insertBefore(root, after || null);
  v = { root, title, sheet, output, blocks: 0, image: null };
  state.pages.set(index, v);
  return v;
}

function onPageStarted(d) {
  const v = pageView(d.page);
  v.sheet.style.aspectRatio = `${d.width} / ${d.height}`;
  if (d.image) {
    const img = document.createElement("img");
    img.alt = `page ${d.page + 1}`;
    v.sheet.prepend(img);
    v.image = img;
    loadImage(img, d.image);
  }
}

// With API keys configured a page image is only for the key that converted the page: fetch it with the
// key and show it from a blob URL (an <img src> cannot send the Authorization header).
async function loadImage(img, url) {
  if (!state.key) { img.src = url; return; }
  try {
    const r = await fetch(url, { headers: { Authorization: `Bearer ${state.key}` } });
    if (r.ok) img.src = URL.createObjectURL(await r.blob());
  } catch (e) { /* no page image: the boxes are drawn all the same */ }
}

// An image block (Image, Figure, ...) comes as <img alt="description"> without a source: show the part
// of the page image under the block's box, captioned with the description; a labelled placeholder when
// there is no page image to crop.
function imageCrop(v, b, alt) {
  const fig = document.createElement("figure");
  fig.className = "crop";
  const canvas = document.createElement("canvas");
  canvas.width = canvas.height = 0;
  const cap = document.createElement("figcaption");
  cap.textContent = alt || `${b.label} (no description)`;
  fig.append(canvas, cap);
  const page = v.image;
  const draw = () => {
    const W = page.naturalWidth, H = page.naturalHeight;
    if (!W || !H) return;
    const [x0, y0, x1, y1] = b.bbox_norm;
    const sx = Math.max(0, Math.floor(x0 * W)), sy = Math.max(0, Math.floor(y0 * H));
    const sw = Math.min(W, Math.ceil(x1 * W)) - sx, sh = Math.min(H, Math.ceil(y1 * H)) - sy;
    if (sw < 1 || sh < 1) return;
    canvas.width = sw;
    canvas.height = sh;
    canvas.getContext("2d").drawImage(page, sx, sy, sw, sh, 0, 0, sw, sh);
    fig.classList.add("drawn");
  };
  if (page && page.complete && page.naturalWidth) draw();
  else if (page) page.addEventListener("load", draw, { once: true });
  return fig;
}

function onBlock(d) {
  const v = pageView(d.page);
  const b = d.block;
  const c = colorFor(b.label);
  addLegend(b.label);
  const [x0, y0, x1, y1] = b.bbox_norm;
  const box = document.createElement("div");
  box.className = "box";
  box.dataset.label = b.label;
  box.dataset.index = String(b.index);
  box.style.setProperty("--c", c);
  box.style.left = `${x0 * 100}%`;
  box.style.top = `${y0 * 100}%`;
  box.style.width = `${(x1 - x0) * 100}%`;
  box.style.height = `${(y1 - y0) * 100}%`;
  const tag = document.createElement("span");
  tag.textContent = b.label;
  box.appendChild(tag);
  v.sheet.appendChild(box);

  const out = document.createElement("div");
  out.className = "block";
  out.dataset.label = b.label;
  out.dataset.index = String(b.index);
  out.style.setProperty("--c", c);
  const t = document.createElement("span");
  t.className = "tag";
  t.textContent = b.label;
  out.appendChild(t);
  const body = document.createElement("div");
  body.innerHTML = b.html; // sanitized by the server's parser (model tag whitelist)
  body.querySelectorAll("math").forEach((m) => { // the model writes TeX inside <math>: show it as such
    const tex = document.createElement("code");
    tex.className = "tex";
    tex.textContent = m.textContent;
    m.replaceWith(tex);
  });
  body.querySelectorAll("img").forEach((img) => { // no src: a figure the service did not crop
    if (!img.getAttribute("src")) img.replaceWith(imageCrop(v, b, img.getAttribute("alt") || ""));
  });
  out.appendChild(body);
  v.output.appendChild(out);
  for (const [a, other] of [[box, out], [out, box]]) {
    a.addEventListener("mouseenter", () => other.classList.add("hot"));
    a.addEventListener("mouseleave", () => other.classList.remove("hot"));
  }
  v.blocks += 1;
}

function onPageReset(d) {
  const v = pageView(d.page);
  v.sheet.querySelectorAll(".box").forEach((el) => el.remove());
  v.output.replaceChildren();
  v.blocks = 0;
}

function onPageDone(d) {
  const v = pageView(d.page);
  v.root.classList.add(d.status);
  v.root.dataset.status = d.status;
  v.title.querySelector(".state").textContent =
    d.status === "failed" ? `failed: ${d.error || "unknown error"}` : `${v.blocks} blocks (${d.status})`;
}

function onDone(d) {
  const doc = d.document;
  showDownloads(doc, state.file);
  document.body.dataset.done = "1";
  setStatus(`Done: ${doc.pages.length} page(s), status ${d.status}.`);
}

// Downloads: a button for every format the API renders (GET /v1/formats), each made from the converted
// Document by POST /v1/render (no second conversion); a format built from the source document (the
// searchable PDF) gets the uploaded file beside it.
async function loadFormats() {
  try {
    const r = await fetch("/v1/formats");
    if (r.ok) state.formats = await r.json();
  } catch (e) { /* no downloads offered */ }
}

function stemOf(path) {
  const base = String(path || "document").split(/[\\/]/).pop();
  return base.includes(".") ? base.slice(0, base.lastIndexOf(".")) : base;
}

function showDownloads(doc, file) {
  state.doc = doc;
  const bar = $("#downloads");
  const label = document.createElement("span");
  label.textContent = "Download";
  bar.replaceChildren(label);
  const stem = stemOf(doc.source.path);
  for (const f of state.formats) {
    if (f.needs_source && !file) continue;
    const b = document.createElement("button");
    b.type = "button";
    b.dataset.format = f.name;
    b.textContent = f.name;
    b.title = `${f.title || f.name}: ${stem}${f.suffix}`;
    b.addEventListener("click", () => download(f, doc, file, b, `${stem}${f.suffix}`));
    bar.appendChild(b);
  }
  bar.hidden = state.formats.length === 0;
}

async function download(f, doc, file, button, fallbackName) {
  button.disabled = true;
  try {
    const headers = state.key ? { Authorization: `Bearer ${state.key}` } : {};
    const json = JSON.stringify(doc);
    let body = json;
    if (f.needs_source) {
      body = new FormData();
      body.append("document", new Blob([json], { type: "application/json" }), "document.json");
      body.append("file", file, file.name);
    } else {
      headers["Content-Type"] = "application/json";
    }
    const r = await fetch(`/v1/render?format=${encodeURIComponent(f.name)}`, { method: "POST", body, headers });
    if (!r.ok) {
      let msg = `HTTP ${r.status}`;
      try { msg += `: ${(await r.json()).detail}`; } catch (e) { /* not JSON */ }
      throw new Error(msg);
    }
    const named = /filename="([^"]+)"/.exec(r.headers.get("Content-Disposition") || "");
    const a = document.createElement("a");
    a.href = URL.createObjectURL(await r.blob());
    a.download = named ? named[1] : fallbackName;
    document.body.appendChild(a);
    a.click();
    a.remove();
    setTimeout(() => URL.revokeObjectURL(a.href), 60000);
    button.dataset.saved = a.download;
  } catch (e) {
    setStatus(`${f.name} download failed: ${e.message || e}`, true);
  } finally {
    button.disabled = false;
  }
}

function onError(d) {
  document.body.dataset.done = "1";
  setStatus(d.error || "conversion failed", true);
}

const HANDLERS = { page_started: onPageStarted, block: onBlock, page_reset: onPageReset, page_done: onPageDone,
                   done: onDone, error: onError };

function dispatch(raw) {
  let event = "message";
  const data = [];
  for (const line of raw.split("\n")) {
    if (line.startsWith("event:")) event = line.slice(6).trim();
    else if (line.startsWith("data:")) data.push(line.slice(5).replace(/^ /, ""));
  }
  if (!data.length || !HANDLERS[event]) return;
  HANDLERS[event](JSON.parse(data.join("\n")));
}

async function convert(file, pages, key) {
  state.pages.clear();
  state.key = key;
  state.file = file;
  $("#downloads").hidden = true;
  $("#pages").replaceChildren();
  delete document.body.dataset.done;
  const form = new FormData();
  form.append("file", file, file.name);
  const qs = new URLSearchParams({ stream: "true" });
  if (pages) qs.set("pages", pages);
  const headers = key ? { Authorization: `Bearer ${key}` } : {};
  setStatus(`Uploading ${file.name}…`);
  const r = await fetch(`/v1/convert?${qs}`, { method: "POST", body: form, headers });
  if (!r.ok) {
    let msg = `HTTP ${r.status}`;
    try { msg += `: ${(await r.json()).detail}`; } catch (e) { /* not JSON */ }
    onError({ error: msg });
    return;
  }
  setStatus(`Converting ${file.name}…`);
  const reader = r.body.pipeThrough(new TextDecoderStream()).getReader();
  let buf = "";
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buf += value.replace(/\r\n/g, "\n");
    let cut;
    while ((cut = buf.indexOf("\n\n")) !== -1) {
      dispatch(buf.slice(0, cut));
      buf = buf.slice(cut + 2);
    }
  }
  if (buf.trim()) dispatch(buf);
  if (!document.body.dataset.done) onError({ error: "the stream ended early" });
}

$("#key").value = localStorage.getItem("ocrserve-key") || "";
loadFormats();
$("#upload").addEventListener("submit", async (ev) => {
  ev.preventDefault();
  const file = $("#file").files[0];
  if (!file) return;
  const key = $("#key").value.trim();
  localStorage.setItem("ocrserve-key", key);
  $("#go").disabled = true;
  try {
    await convert(file, $("#page-range").value.trim(), key);
  } catch (e) {
    onError({ error: String(e) });
  } finally {
    $("#go").disabled = false;
  }
});
