import type http from 'node:http';

/** The cookie that carries the HTTP token for a browser, once it opened a link with `?access_token=`. */
export const TOKEN_COOKIE = 'spillway_token';

/**
 * The token a browser presents. A browser cannot add an `Authorization` header to a link it
 * opens, nor to an EventSource: the dashboard's link carries the token as `?access_token=`
 * (RFC 6750's query form), and the server answers it with an HttpOnly, same-site cookie that
 * the page's own requests (its script, its style, its event stream) then carry.
 */
export function browserToken(req: http.IncomingMessage): { token: string; fromQuery: boolean } | undefined {
  const query = (req.url ?? '').split('?')[1];
  if (query !== undefined) {
    const token = new URLSearchParams(query).get('access_token');
    if (token !== null && token !== '') return { token, fromQuery: true };
  }
  for (const part of (req.headers.cookie ?? '').split(';')) {
    const [name, ...value] = part.trim().split('=');
    if (name === TOKEN_COOKIE && value.length > 0) {
      try {
        return { token: decodeURIComponent(value.join('=')), fromQuery: false };
      } catch {
        return undefined;
      }
    }
  }
  return undefined;
}

/** The Set-Cookie value that lets the page's further requests through. */
export function tokenCookie(token: string): string {
  return `${TOKEN_COOKIE}=${encodeURIComponent(token)}; HttpOnly; SameSite=Strict; Path=/`;
}
