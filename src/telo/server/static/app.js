// telo ui: a little progressive enhancement over plain HTML forms (everything works without it).
"use strict";

document.addEventListener("DOMContentLoaded", () => {
  // Confirm destructive actions (cancel, resume --force) before the form posts.
  for (const form of document.querySelectorAll("form[data-confirm]")) {
    form.addEventListener("submit", (event) => {
      if (!window.confirm(form.dataset.confirm)) event.preventDefault();
    });
  }
  // Check a JSON payload before it is sent, so a typo is caught here rather than answered by the server.
  for (const area of document.querySelectorAll("textarea[data-json]")) {
    const check = () => {
      try {
        JSON.parse(area.value.trim() === "" ? "null" : area.value);
        area.setCustomValidity("");
      } catch (err) {
        area.setCustomValidity("not JSON: " + err.message);
      }
    };
    area.addEventListener("input", check);
    area.form.addEventListener("submit", (event) => {
      check();
      if (!area.reportValidity()) event.preventDefault();
    });
  }
  // Notices are one-shot: drop them from the address bar so a reload does not repeat them.
  const url = new URL(window.location.href);
  if (url.searchParams.has("notice")) {
    url.searchParams.delete("notice");
    url.searchParams.delete("level");
    window.history.replaceState(null, "", url.pathname + url.search + url.hash);
  }
});
