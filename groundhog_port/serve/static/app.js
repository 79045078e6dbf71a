"use strict";
// The page of `groundhog-port serve`: asks POST /translate and shows the answer.
(function () {
  const $ = (id) => document.getElementById(id);
  const MAX_LABEL = 20;

  function label(w) { return w.length <= MAX_LABEL ? w : w.slice(0, MAX_LABEL - 1) + "\u2026"; }
  function cost(c) { return typeof c === "number" ? c.toFixed(4) : String(c); }
  function setStatus(text, isError) {
    $("status").textContent = text;
    $("status").className = isError ? "error" : "";
  }

  // Figure 3 of the paper: rows are target words, columns source words, white = 1, black = 0.
  function drawHeatmap(att, unknownPositions) {
    const canvas = $("heatmap");
    const ctx = canvas.getContext("2d");
    const S = att.source.length, T = att.target.length;
    const font = "13px system-ui, 'DejaVu Sans', sans-serif", pad = 6;
    ctx.font = font;
    const width = (ws) => Math.max(...ws.map((w) => ctx.measureText(label(w)).width));
    const srcW = Math.ceil(width(att.source)), trgW = Math.ceil(width(att.target));
    const avail = Math.max(240, canvas.parentElement.clientWidth - trgW - 3 * pad);
    const cell = Math.max(16, Math.min(34, Math.floor(avail / S)));
    const W = trgW + 2 * pad + S * cell + pad, H = srcW + 2 * pad + T * cell + pad;
    const dpr = window.devicePixelRatio || 1;
    canvas.width = Math.round(W * dpr); canvas.height = Math.round(H * dpr);
    canvas.style.width = W + "px"; canvas.style.height = H + "px";
    ctx.setTransform(dpr, 0, 0, dpr, 0, 0);
    ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, W, H);
    const x0 = trgW + 2 * pad, y0 = srcW + 2 * pad;
    for (let t = 0; t < T; t++) {
      for (let s = 0; s < S; s++) {
        const g = Math.round(255 * Math.min(1, Math.max(0, att.weights[t][s])));
        ctx.fillStyle = `rgb(${g},${g},${g})`;
        ctx.fillRect(x0 + s * cell, y0 + t * cell, cell, cell);
      }
    }
    ctx.font = font; ctx.textBaseline = "middle";
    const unk = new Set(unknownPositions);
    ctx.textAlign = "left";
    for (let s = 0; s < S; s++) {        // source words written upwards above their column
      ctx.save();
      ctx.translate(x0 + s * cell + cell / 2, y0 - pad);
      ctx.rotate(-Math.PI / 2);
      ctx.fillStyle = unk.has(s) ? "#b36b00" : "#1d2329";
      ctx.fillText(label(att.source[s]), 0, 0);
      ctx.restore();
    }
    ctx.textAlign = "right"; ctx.fillStyle = "#1d2329";
    for (let t = 0; t < T; t++) ctx.fillText(label(att.target[t]), x0 - pad, y0 + t * cell + cell / 2);
    // the geometry, for tests and tools that read the picture back
    Object.assign(canvas.dataset, { x0: String(x0), y0: String(y0), cell: String(cell) });
    canvas.dataset.drawn = `${T}x${S}`;
  }

  function show(r) {
    $("result").hidden = false;
    $("translation").textContent = r.error ? "(no translation)" : r.detokenized;
    $("translation").dataset.tokens = r.translation;
    $("translation-tokens").textContent = r.translation;
    $("cost").textContent = r.cost === null ? "–" : cost(r.cost);
    const marked = $("source-marked");
    marked.textContent = "";
    const unk = new Set(r.unknown_positions);
    r.tokens.forEach((w, i) => {
      const span = document.createElement("span");
      span.textContent = w;
      if (unk.has(i)) { span.className = "unk"; span.title = "unknown word"; }
      marked.appendChild(span);
    });
    $("unknown-panel").hidden = r.unknown_words.length === 0;
    $("unknown").textContent = "";
    r.unknown_words.forEach((w, i) => {
      if (i) $("unknown").appendChild(document.createTextNode(", "));
      const m = document.createElement("mark"); m.className = "unk"; m.textContent = w;
      $("unknown").appendChild(m);
    });
    const body = $("nbest").tBodies[0];
    body.textContent = "";
    r.nbest.forEach((h, i) => {
      const tr = body.insertRow();
      if (h.best) tr.className = "best";
      tr.insertCell().textContent = String(i + 1);
      const c = tr.insertCell(); c.className = "num"; c.textContent = cost(h.cost);
      tr.insertCell().textContent = h.translation;
    });
    const canvas = $("heatmap");
    delete canvas.dataset.drawn;
    if (r.attention) {
      canvas.hidden = false; $("heatmap-note").hidden = false;
      drawHeatmap(r.attention, r.unknown_positions);
    } else {
      canvas.hidden = true;
      $("heatmap-note").hidden = false;
      $("heatmap-note").textContent = r.error ? "" : "this model has no attention (RNNencdec)";
    }
  }

  async function translate(ev) {
    ev.preventDefault();
    const text = $("source").value.trim();
    if (!text) return;
    const button = $("translate");
    button.disabled = true;
    setStatus("translating…", false);
    const t0 = performance.now();
    try {
      const resp = await fetch("/translate", {
        method: "POST",
        headers: { "Content-Type": "application/json" },
        body: JSON.stringify({
          text: text, beam_size: parseInt($("beam").value, 10) || 10,
          ignore_unk: $("ignore-unk").checked, normalize: $("normalize").checked,
          tokenized: $("tokenized").checked,
        }),
      });
      const data = await resp.json();
      if (!resp.ok) { setStatus(data.error || resp.statusText, true); return; }
      const r = data.results[0];
      show(r);
      if (r.error) setStatus("the search failed on this sentence: " + r.error, true);
      else setStatus(`done in ${Math.round(performance.now() - t0)} ms`, false);
    } catch (err) {
      setStatus("no answer from the server: " + err, true);
    } finally {
      button.disabled = false;
    }
  }

  async function init() {
    $("input").addEventListener("submit", translate);
    $("source").addEventListener("keydown", (e) => {
      if (e.key === "Enter" && !e.shiftKey) { e.preventDefault(); $("input").requestSubmit(); }
    });
    try {
      const h = await (await fetch("/health")).json();
      $("beam").value = h.beam_size; $("beam").max = h.limits.max_beam;
      $("source").maxLength = h.limits.max_chars;
      $("tokenized").checked = h.pretokenized;
      $("langs").textContent = `${h.languages[0].toUpperCase()} \u2192 ${h.languages[1].toUpperCase()}`;
    } catch (err) { /* the defaults in the page stay */ }
    document.body.dataset.ready = "1";
  }
  init();
})();
