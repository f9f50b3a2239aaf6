import { defineConfig } from 'vite';
import react from '@vitejs/plugin-react';

// The dev server proxies /v1 to firstword, so the page and the API share
// one origin: no CORS set-up, and in local mode no key. FIRSTWORD_URL
// points it at another gateway (default: `firstword serve`'s address).
// The Host header is left as the page's (no changeOrigin): firstword then
// sees a same-origin request from a loopback name, as it does from its
// own chat page.
const target = process.env.FIRSTWORD_URL || 'http://127.0.0.1:8080';

export default defineConfig({
  plugins: [react()],
  server: {
    proxy: { '/v1': { target } },
  },
});
