// Talking to the admin listener. The admin key lives in this tab's
// sessionStorage only (gone when the tab closes) and travels in the
// Authorization header of each request — never in a cookie, so another site
// cannot make the browser send it (no CSRF), and `credentials: 'omit'` keeps
// any cookie of this origin out of the requests too.

const STORAGE_KEY = 'kimi-relay.admin-key';

export const adminKey = () => sessionStorage.getItem(STORAGE_KEY);
export const setAdminKey = (key) => sessionStorage.setItem(STORAGE_KEY, key);
export const clearAdminKey = () => sessionStorage.removeItem(STORAGE_KEY);

// The key was refused (401): the console logs out.
export class AuthError extends Error {}

export class ApiError extends Error {
  constructor(message, status, code) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

export function authHeaders(extra = {}) {
  const key = adminKey();
  if (!key) throw new AuthError('no admin key');
  return { authorization: `Bearer ${key}`, ...extra };
}

// A JSON call: resolves to the parsed body of a 2xx answer; throws AuthError
// on 401 and ApiError (with the OpenAI-shaped error's message) otherwise.
export async function api(path, { method = 'GET', body, signal } = {}) {
  const headers = authHeaders(body === undefined ? {} : { 'content-type': 'application/json' });
  const res = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    signal,
    cache: 'no-store',
    credentials: 'omit',
    referrerPolicy: 'no-referrer',
  });
  const text = await res.text();
  let json = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    json = null;
  }
  if (res.status === 401) throw new AuthError(json?.error?.message ?? 'the admin key was refused');
  if (!res.ok) {
    throw new ApiError(json?.error?.message ?? `HTTP ${res.status}`, res.status, json?.error?.code);
  }
  return json;
}

// The runtime key API (docs/operations.md, Runtime keys).
export const keysApi = {
  create: (settings) => api('/admin/keys', { method: 'POST', body: settings }),
  update: (name, patch) => api(`/admin/keys/${encodeURIComponent(name)}`, { method: 'PATCH', body: patch }),
  revoke: (name) => api(`/admin/keys/${encodeURIComponent(name)}`, { method: 'DELETE' }),
  restore: (name) => api(`/admin/keys/${encodeURIComponent(name)}`, { method: 'PATCH', body: { revoked: false } }),
  rotate: (name, graceSeconds) =>
    api(`/admin/keys/${encodeURIComponent(name)}/rotate`, { method: 'POST', body: { grace_seconds: graceSeconds } }),
};
