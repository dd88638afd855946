// The JSON API, read relative to the page so the UI works behind a proxy
// that mounts budgetd under a sub-path.

// ApiError is an error answer of the API: {"error":{"code":…,"message":…}}.
export class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
    this.code = code;
  }
}

// get fetches api/v1/<path> with the non-empty params. signal aborts the
// request when the user navigates away; the server then cancels its query.
export async function get(path, params, signal) {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params || {})) {
    if (v !== undefined && v !== null && v !== '') q.set(k, v);
  }
  const qs = q.toString();
  const resp = await fetch(`api/v1/${path}${qs ? `?${qs}` : ''}`, {
    signal, headers: { Accept: 'application/json' },
  });
  let body = null;
  try {
    body = await resp.json();
  } catch {
    if (resp.ok) throw new ApiError(resp.status, 'bad_response', `api/v1/${path} did not answer JSON`);
  }
  if (!resp.ok) {
    const e = body && body.error;
    throw new ApiError(resp.status, e ? e.code : 'http', e ? e.message : `HTTP ${resp.status}`);
  }
  return body;
}
