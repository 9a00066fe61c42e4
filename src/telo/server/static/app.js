// telo ui: a little progressive enhancement over plain HTML forms (everything works without it).
"use strict";

// The top-level keys an object schema requires, or a type mismatch: the server validates the whole schema on
// delivery; this catches the commonest slip before the form posts.
function schemaProblem(schema, value) {
  if (!schema || typeof schema !== "object") return "";
  const isObject = value !== null && typeof value === "object" && !Array.isArray(value);
  if (schema.type === "object" && !isObject) return "the payload must be a JSON object";
  if (isObject && Array.isArray(schema.required)) {
    const missing = schema.required.filter((key) => !(key in value));
    if (missing.length) return "missing required: " + missing.join(", ");
  }
  return "";
}

function enhance(root) {
  // Confirm destructive actions (cancel, resume --force) before the form posts.
  for (const form of root.querySelectorAll("form[data-confirm]")) {
    form.addEventListener("submit", (event) => {
      if (!window.confirm(form.dataset.confirm)) event.preventDefault();
    });
  }
  // A button may ask on its own (the runs page's "Cancel selected"; "Resume selected" posts at once).
  for (const button of root.querySelectorAll("button[data-confirm]")) {
    button.addEventListener("click", (event) => {
      if (!window.confirm(button.dataset.confirm)) event.preventDefault();
    });
  }
  // A ticked row keeps its part of the page from being swapped by the live refresh (and losing the tick).
  for (const box of root.querySelectorAll('input[type="checkbox"][form]')) {
    box.addEventListener("change", () => {
      if (box.checked) box.dataset.dirty = "1"; else delete box.dataset.dirty;
    });
  }
  // Check a JSON payload (and the Await's schema, when it recorded one) before it is sent, so a typo is
  // caught here rather than answered by the server.
  for (const area of root.querySelectorAll("textarea[data-json]")) {
    let schema = null;
    try { schema = area.dataset.schema ? JSON.parse(area.dataset.schema) : null; } catch (err) { schema = null; }
    const check = () => {
      try {
        const value = JSON.parse(area.value.trim() === "" ? "null" : area.value);
        area.setCustomValidity(schemaProblem(schema, value));
      } catch (err) {
        area.setCustomValidity("not JSON: " + err.message);
      }
    };
    area.addEventListener("input", () => { area.dataset.dirty = "1"; check(); });
    area.form.addEventListener("submit", (event) => {
      check();
      if (!area.reportValidity()) event.preventDefault();
    });
  }
}

// Live refresh: the server says "change" over server-sent events (server/live.py); the page fetches itself
// and swaps in each [data-region] that differs — except one the operator is typing in.
function live(container) {
  if (!window.EventSource || !window.fetch) return;
  const badge = document.getElementById("live");
  let busy = false, again = false;
  const refresh = async () => {
    if (busy) { again = true; return; }
    busy = true;
    try {
      const response = await fetch(window.location.pathname + window.location.search,
                                   { credentials: "same-origin", headers: { accept: "text/html" } });
      if (!response.ok) return;
      const fresh = new DOMParser().parseFromString(await response.text(), "text/html");
      for (const region of fresh.querySelectorAll("[data-region]")) {
        const current = container.querySelector(`[data-region="${region.dataset.region}"]`);
        if (!current || current.innerHTML === region.innerHTML) continue;
        if (current.contains(document.activeElement) || current.querySelector("[data-dirty]")) continue;
        const adopted = document.importNode(region, true);
        current.replaceWith(adopted);
        enhance(adopted);
      }
      container.dataset.refreshed = String(Number(container.dataset.refreshed || 0) + 1);
    } catch (err) {
      // a failed refresh leaves the page as it was; the next change tries again
    } finally {
      busy = false;
      if (again) { again = false; refresh(); }
    }
  };
  const source = new EventSource(container.dataset.live);
  source.addEventListener("open", () => { if (badge) { badge.hidden = false; badge.textContent = "live"; } });
  source.addEventListener("error", () => { if (badge) badge.textContent = "reconnecting"; });
  source.addEventListener("change", refresh);
  source.addEventListener("gone", () => source.close());
}

document.addEventListener("DOMContentLoaded", () => {
  enhance(document);
  const container = document.querySelector("[data-live]");
  if (container) live(container);
  // Notices are one-shot: drop them from the address bar so a reload does not repeat them.
  const url = new URL(window.location.href);
  if (url.searchParams.has("notice")) {
    url.searchParams.delete("notice");
    url.searchParams.delete("level");
    window.history.replaceState(null, "", url.pathname + url.search + url.hash);
  }
});
