// ocrserve API docs: reads the OpenAPI document and lists each operation (no CDN, no framework).
// Everything from the spec goes in as text (textContent), never as HTML.
"use strict";

function el(tag, text, cls) {
  const e = document.createElement(tag);
  if (text !== undefined && text !== null) e.textContent = String(text);
  if (cls) e.className = cls;
  return e;
}

function resolve(spec, schema) {
  let s = schema || {};
  for (let i = 0; s.$ref && i < 10; i++) {
    s = s.$ref.replace(/^#\//, "").split("/").reduce((o, k) => (o || {})[k], spec) || {};
  }
  return s;
}

function typeOf(spec, schema) {
  const s = resolve(spec, schema);
  if (s.enum) return s.enum.join(" | ");
  if (s.anyOf) return s.anyOf.map((x) => typeOf(spec, x)).join(" | ");
  if (s.type === "array") return `${typeOf(spec, s.items)}[]`;
  return s.format ? `${s.type} (${s.format})` : (s.type || s.title || "object");
}

function table(head, rows) {
  const t = el("table");
  const tr = el("tr");
  head.forEach((h) => tr.append(el("th", h)));
  t.append(tr);
  rows.forEach((r) => {
    const row = el("tr");
    r.forEach((c) => row.append(el("td", c)));
    t.append(row);
  });
  return t;
}

function operation(spec, path, method, op) {
  const sec = el("section", null, "op");
  const h = el("h3");
  h.append(el("span", method, `method ${method}`), el("span", path));
  sec.append(h);
  if (op.summary) sec.append(el("p", op.summary));
  if (op.description) sec.append(el("p", op.description, "desc"));
  const params = op.parameters || [];
  if (params.length) {
    sec.append(el("h4", "Parameters"));
    sec.append(table(["name", "in", "type", "required", "description"], params.map((p) =>
      [p.name, p.in, typeOf(spec, p.schema), p.required ? "yes" : "no", p.description || ""])));
  }
  const body = (op.requestBody || {}).content || {};
  Object.entries(body).forEach(([ctype, media]) => {
    const s = resolve(spec, media.schema);
    sec.append(el("h4", `Request body: ${ctype}`));
    const req = new Set(s.required || []);
    sec.append(table(["field", "type", "required", "description"], Object.entries(s.properties || {}).map(
      ([name, f]) => [name, typeOf(spec, f), req.has(name) ? "yes" : "no", resolve(spec, f).description || ""])));
  });
  const answers = Object.entries(op.responses || {});
  if (answers.length) {
    sec.append(el("h4", "Answers"));
    sec.append(table(["status", "description", "headers"], answers.map(([code, r]) =>
      [code, r.description || "", Object.keys(r.headers || {}).join(", ")])));
  }
  return sec;
}

async function main() {
  const main = document.getElementById("operations");
  let spec;
  try {
    spec = await (await fetch(main.dataset.spec)).json();
  } catch (e) {
    main.replaceChildren(el("p", `cannot load ${main.dataset.spec}: ${e}`));
    return;
  }
  document.getElementById("title").textContent = `${spec.info.title} ${spec.info.version}`;
  document.getElementById("description").textContent = spec.info.description || "";
  const ops = [];
  Object.entries(spec.paths || {}).forEach(([path, item]) => {
    ["get", "post", "put", "patch", "delete"].forEach((m) => {
      if (item[m]) ops.push(operation(spec, path, m, item[m]));
    });
  });
  main.replaceChildren(...ops);
  document.body.dataset.ready = String(ops.length);
}

main();
