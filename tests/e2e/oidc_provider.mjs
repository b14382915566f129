// A real OpenID provider for the single sign-on tests: npm `oidc-provider` with its built-in
// development login and consent pages, driven by the browser like any provider's pages.
//
//   node tests/e2e/oidc_provider.mjs CONFIG.json
//
// CONFIG.json: {"port": 0, "clients": [{client_id, client_secret, redirect_uris, ...}],
//               "accounts": "path/to/accounts.json"}
// accounts.json maps a login name to its claims ({"email": …, "email_verified": …, "groups": […]});
// it is read again on every sign-in, so a test changes a user's groups between two sign-ins by
// rewriting it. The dev login page accepts any password; a login name missing from the file is
// a user with only a subject. Prints `listening <issuer>` once it serves.
import { readFileSync } from 'node:fs';
import { createServer } from 'node:net';

import Provider from 'oidc-provider';

const config = JSON.parse(readFileSync(process.argv[2], 'utf8'));

function freePort() {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      server.close(() => resolve(port));
    });
  });
}

const port = config.port || (await freePort());
const issuer = `http://127.0.0.1:${port}`;

const provider = new Provider(issuer, {
  clients: config.clients,
  claims: {
    openid: ['sub'],
    email: ['email', 'email_verified'],
    profile: ['name', 'given_name', 'family_name', 'preferred_username'],
    groups: ['groups'],
  },
  scopes: ['openid', 'email', 'profile', 'groups', 'offline_access'],
  async findAccount(ctx, id) {
    const accounts = JSON.parse(readFileSync(config.accounts, 'utf8'));
    const claims = accounts[id] || {};
    return {
      accountId: id,
      async claims() {
        return { sub: id, preferred_username: id, ...claims };
      },
    };
  },
  features: {
    devInteractions: { enabled: true },
    rpInitiatedLogout: { enabled: true },
  },
  // Plain http on 127.0.0.1 in tests; the cookie keys are fixed so a restart keeps sessions.
  cookies: { keys: ['tessera-test-oidc-cookie-key'] },
});
// The dev pages post back to the provider over http: nothing here is behind a TLS proxy.
provider.proxy = false;

provider.listen(port, '127.0.0.1', () => {
  console.log(`listening ${issuer}`);
});
