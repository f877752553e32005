// The ARC inspector: read-only views of the server's sessions through its JSON routes.
// Nothing is fetched from outside; under --api-key the key is asked for once per tab.
"use strict";
const API = "/v1/arc/sessions";
const $ = (id) => document.getElementById(id);
const params = new URLSearchParams(location.search);
const sid = params.get("session");
let catalogPage = 1, catalogPages = 1;

function headers() {
  const key = sessionStorage.getItem("arc-api-key");
  return key ? { Authorization: "Bearer " + key } : {};
}

async function api(path, asText) {
  const response = await fetch(path, { headers: headers() });
  if (response.status === 401) {
    $("key-form").hidden = false;
    throw new Error("this server needs its API key");
  }
  if (!response.ok) {
    let message = response.status + " " + response.statusText;
    try { message = (await response.json()).error.message; } catch (ignored) { /* not JSON */ }
    throw new Error(message);
  }
  return asText ? response.text() : response.json();
}

function show(error) { $("status").textContent = String(error.message || error); }

// Ids the server says are stored (the view's stubs, catalog pages, search results): only
// these are marked, so an example id in ARC's note or a § in a message stays plain text.
const stored = new Set();

// Text with every citation stub (§ and a stored id) as a clickable element; the rest as text.
function withStubs(text) {
  const fragment = document.createDocumentFragment();
  const pattern = /§([0-9a-f]{6,40})/g;
  let last = 0, match;
  while ((match = pattern.exec(text)) !== null) {
    if (!stored.has(match[1])) continue;
    fragment.append(text.slice(last, match.index));
    const stub = document.createElement("a");
    stub.className = "stub";
    stub.tabIndex = 0;
    stub.dataset.id = match[1];
    stub.textContent = match[0];
    fragment.append(stub);
    last = pattern.lastIndex;
  }
  fragment.append(text.slice(last));
  return fragment;
}

async function openObservation(id) {
  try {
    const text = await api(`${API}/${encodeURIComponent(sid)}/observations/${encodeURIComponent(id)}`, true);
    $("observation").textContent = text;
    $("observation-id").textContent = "§" + id + " (" + text.length.toLocaleString() + " characters)";
    document.querySelectorAll(".stub.selected").forEach((node) => node.classList.remove("selected"));
    document.querySelectorAll(`.stub[data-id="${id}"]`).forEach((node) => node.classList.add("selected"));
  } catch (error) { show(error); }
}

document.addEventListener("click", (event) => {
  const stub = event.target.closest(".stub");
  if (stub) openObservation(stub.dataset.id);
});
document.addEventListener("keydown", (event) => {
  if (event.key === "Enter" && event.target.classList.contains("stub")) openObservation(event.target.dataset.id);
});

function messageText(message) {
  let text = typeof message.content === "string" ? message.content
    : Array.isArray(message.content) ? message.content.map((part) => part.text || "").join("") : "";
  for (const call of message.tool_calls || []) {
    text += (text ? "\n" : "") + "→ " + call.function.name + "(" + call.function.arguments + ")";
  }
  return text;
}

async function loadSessions() {
  $("sessions").hidden = false;
  const { sessions } = await api(API);
  const rows = $("session-rows");
  rows.replaceChildren();
  for (const session of sessions) {
    const row = document.createElement("tr");
    const link = document.createElement("a");
    link.href = "?session=" + encodeURIComponent(session.id);
    link.textContent = session.id;
    const cells = [link, (session.apis || []).join(", "), session.client_id || "", session.observations,
      session.turns, session.compactions, session.requests,
      new Date(session.last_used * 1000).toLocaleString(), session.in_memory ? "in memory" : "unloaded"];
    for (const value of cells) {
      const cell = document.createElement("td");
      cell.append(value instanceof Node ? value : String(value ?? ""));
      row.append(cell);
    }
    rows.append(row);
  }
  if (!sessions.length) $("status").textContent = "No sessions yet.";
}

async function loadCatalog(page) {
  const catalog = await api(`${API}/${encodeURIComponent(sid)}/catalog?page=${page}`);
  catalogPage = catalog.page; catalogPages = catalog.pages;
  catalog.ids.forEach((id) => stored.add(id));
  $("catalog").replaceChildren(withStubs(catalog.text || "(no observation has left the view yet)"));
  $("catalog-page").textContent = `page ${catalog.page} of ${catalog.pages}`;
}

async function loadSession() {
  $("session").hidden = false;
  $("where").textContent = "session " + sid;
  const timeline = await api(`${API}/${encodeURIComponent(sid)}/timeline`, true);
  // The server draws the SVG (arc_vllm/inspector/timeline.py) from numbers only.
  $("timeline").innerHTML = timeline;
  const view = await api(`${API}/${encodeURIComponent(sid)}/view`);
  view.stubs.forEach((id) => stored.add(id));
  $("view-tokens").textContent = `${view.tokens.toLocaleString()} of ${view.budget_tokens.toLocaleString()} tokens`;
  const list = $("view");
  list.replaceChildren();
  // The messages that hold the user's own words: never reduced to an id, marked as theirs.
  const human = new Set(view.human_messages || []);
  const counts = view.human_turns || {};
  if (human.size) {
    $("view-tokens").textContent += ` · the user's messages: ${counts.verbatim || 0} whole, ` +
      `${counts.shortened || 0} shortened to their head` + (counts.left_out ? `, ${counts.left_out} left out` : "");
  }
  view.messages.forEach((message, index) => {
    const item = document.createElement("li");
    if (human.has(index)) {
      item.className = "human";
      item.title = "the user's own words";
    }
    const role = document.createElement("span");
    role.className = "role";
    role.textContent = human.has(index) ? message.role + " · the user's words" : message.role;
    const content = document.createElement("div");
    content.className = "content";
    content.append(withStubs(messageText(message)));
    item.append(role, content);
    list.append(item);
  });
  await loadCatalog(1);
}

$("catalog-previous").addEventListener("click", () => loadCatalog(Math.max(1, catalogPage - 1)).catch(show));
$("catalog-next").addEventListener("click", () => loadCatalog(catalogPage % catalogPages + 1).catch(show));
$("search-form").addEventListener("submit", async (event) => {
  event.preventDefault();
  try {
    const { results } = await api(`${API}/${encodeURIComponent(sid)}/search?q=${encodeURIComponent($("search").value)}`);
    const list = $("search-results");
    list.replaceChildren();
    for (const result of results) {
      stored.add(result.id);
      const item = document.createElement("li");
      item.append(withStubs(`§${result.id} ${result.signature}\n`));
      const snippet = document.createElement("div");
      snippet.className = "content";
      snippet.textContent = result.snippet;
      item.append(snippet);
      list.append(item);
    }
    if (!results.length) list.textContent = "No stored observation contains that text.";
  } catch (error) { show(error); }
});
$("key-form").addEventListener("submit", (event) => {
  event.preventDefault();
  sessionStorage.setItem("arc-api-key", $("key").value);
  location.reload();
});

(sid ? loadSession() : loadSessions()).catch(show);
