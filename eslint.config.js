import js from '@eslint/js';
import tseslint from 'typescript-eslint';

export default tseslint.config(
  { ignores: ['dist/', 'build/', 'docs/api/', 'node_modules/', 'coverage/', 'scratch/'] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    languageOptions: { globals: { process: 'readonly', console: 'readonly', Buffer: 'readonly', setTimeout: 'readonly', clearTimeout: 'readonly', setInterval: 'readonly', clearInterval: 'readonly', setImmediate: 'readonly', queueMicrotask: 'readonly', performance: 'readonly', WeakRef: 'readonly', FinalizationRegistry: 'readonly', globalThis: 'readonly' } },
    rules: {
      '@typescript-eslint/no-explicit-any': 'error',
      '@typescript-eslint/no-unused-vars': ['error', { argsIgnorePattern: '^_', varsIgnorePattern: '^_' }],
      'no-restricted-syntax': ['error', {
        selector: "CallExpression[callee.property.name=/^(readFileSync|writeFileSync|readSync|writeSync|openSync|fsyncSync|unlinkSync|rmSync|mkdirSync|statSync|readdirSync|renameSync|appendFileSync|existsSync)$/]",
        message: 'Runtime code must not call synchronous fs functions (they block the event loop).'
      }]
    }
  },
  {
    // The dashboard's page script runs in the browser, as it is (no build step).
    files: ['static/**/*.js'],
    languageOptions: { sourceType: 'script', globals: { window: 'readonly', document: 'readonly', EventSource: 'readonly', console: 'readonly' } },
    rules: { strict: 'off' }
  },
  {
    files: ['test/**', 'benchmarks/**', 'examples/**'],
    rules: { 'no-restricted-syntax': 'off' }
  }
);
