/**
 * The deployment recipes: every Kubernetes manifest validates against the Kubernetes schemas,
 * passes only flags and SPILLWAY_* variables the CLI has, and probes a route the process
 * serves; the Dockerfile's stages, files, user and entrypoint are real. (No container engine
 * runs here: the image itself is not built by the tests.)
 */
import assert from 'node:assert/strict';
import { access, readFile, readdir } from 'node:fs/promises';
import path from 'node:path';
import { test } from 'node:test';
import { Deployment, StatefulSet } from 'kubernetes-models/apps/v1';
import { Secret, Service } from 'kubernetes-models/v1';
import { parseAllDocuments } from 'yaml';
import { cli } from '../cli/helpers.js';
import { repoRoot } from '../helpers/suite.js';

type Manifest = { kind: string; apiVersion: string; metadata: { name: string }; spec?: Record<string, unknown> };
interface Container {
  name: string;
  image: string;
  args?: string[];
  env?: Array<{ name: string; value?: string; valueFrom?: unknown }>;
  ports?: Array<{ name?: string; containerPort: number }>;
  readinessProbe?: { httpGet?: { path: string; port: string | number } };
  livenessProbe?: { httpGet?: { path: string; port: string | number } };
  volumeMounts?: Array<{ name: string; mountPath: string }>;
}

const MODELS: Record<string, new (data: never) => { validate(): void }> = { Deployment, StatefulSet, Service, Secret };

async function manifests(): Promise<Array<{ file: string; doc: Manifest }>> {
  const dir = path.join(repoRoot, 'deploy/kubernetes');
  const out: Array<{ file: string; doc: Manifest }> = [];
  for (const file of (await readdir(dir)).filter((f) => f.endsWith('.yaml')).sort()) {
    for (const document of parseAllDocuments(await readFile(path.join(dir, file), 'utf8'))) {
      assert.deepEqual(document.errors, [], `${file} parses as YAML`);
      out.push({ file, doc: document.toJS() as Manifest });
    }
  }
  return out;
}

/** Flags and SPILLWAY_* variables of a command, from its --help. */
async function cliSurface(command: string): Promise<{ flags: Set<string>; env: Set<string> }> {
  const help = await cli([command, '--help']);
  assert.equal(help.code, 0, help.stderr);
  const text = help.stdout.replace(/\s+/g, ' ');
  return { flags: new Set(text.match(/--[a-z][a-z-]+/g)), env: new Set(text.match(/SPILLWAY_[A-Z_]+/g)) };
}

test('every manifest validates against the Kubernetes schemas', async () => {
  const all = await manifests();
  assert.ok(all.length >= 3, 'scheduler Deployment, its Service, the workers');
  for (const { file, doc } of all) {
    const Model = MODELS[doc.kind];
    assert.ok(Model !== undefined, `${file}: ${doc.kind} has a model here`);
    assert.doesNotThrow(() => new Model(doc as never).validate(), `${file}: ${doc.kind} ${doc.metadata.name}`);
  }
  // The check can fail: a misspelt field is refused.
  const bad = structuredClone(all.find((m) => m.doc.kind === 'Deployment')?.doc) as Manifest;
  (bad.spec as Record<string, unknown>).replicas = 'three';
  assert.throws(() => new Deployment(bad as never).validate());
});

test('the containers pass only flags and SPILLWAY_* variables the CLI has; probes hit /health on the HTTP port', async () => {
  const surfaces = new Map<string, { flags: Set<string>; env: Set<string> }>();
  const other = new Set(['SPILLWAY_LOG']);
  let containers = 0;
  for (const { file, doc } of await manifests()) {
    if (doc.kind !== 'Deployment' && doc.kind !== 'StatefulSet') continue;
    const pod = (doc.spec as { template: { spec: { containers: Container[]; volumes?: Array<{ name: string }> } } }).template.spec;
    for (const container of pod.containers) {
      containers++;
      const args = container.args ?? [];
      const command = args[0];
      assert.ok(command === 'scheduler' || command === 'worker', `${file}: ${container.name} runs a spillway command`);
      const surface = surfaces.get(command) ?? (await cliSurface(command));
      surfaces.set(command, surface);
      for (const arg of args.filter((a) => a.startsWith('--'))) assert.ok(surface.flags.has(arg), `${file}: ${arg} is a flag of spillway ${command}`);
      for (const { name } of container.env ?? []) {
        if (name.startsWith('SPILLWAY_')) assert.ok(surface.env.has(name) || other.has(name), `${file}: ${name} is a variable of spillway ${command}`);
      }
      const httpPort = args[args.indexOf('--http-port') + 1];
      assert.ok(args.includes('--http-port'), `${file}: ${container.name} serves HTTP for its probes`);
      const named = new Map((container.ports ?? []).map((p) => [p.name, p.containerPort]));
      for (const probe of [container.readinessProbe, container.livenessProbe]) {
        assert.equal(probe?.httpGet?.path, '/health', `${file}: probes use /health`);
        const port = probe?.httpGet?.port;
        assert.equal(String(typeof port === 'string' ? named.get(port) : port), httpPort, `${file}: the probe's port is --http-port`);
      }
      const env = new Map((container.env ?? []).map((e) => [e.name, e]));
      assert.ok(env.get('SPILLWAY_TOKEN')?.valueFrom !== undefined, `${file}: the token comes from a Secret`);
      for (const name of ['SPILLWAY_TLS_CA_FILE', 'SPILLWAY_TLS_CERT', 'SPILLWAY_TLS_KEY']) {
        const value = env.get(name)?.value ?? '';
        assert.ok((container.volumeMounts ?? []).some((m) => value.startsWith(`${m.mountPath}/`)), `${file}: ${name} is a file of a mounted volume`);
      }
      if (command === 'worker') {
        assert.equal(args[args.indexOf('--memory-limit') + 1], 'auto', `${file}: the worker's memory follows the pod's limit`);
        const spill = args[args.indexOf('--local-directory') + 1];
        assert.ok((container.volumeMounts ?? []).some((m) => m.mountPath === spill), `${file}: the spill folder is a mounted volume`);
      }
    }
  }
  assert.ok(containers >= 2);
});

test('the Dockerfile: multi-stage, production dependencies only, a non-root user, files and entrypoint that exist', async () => {
  const text = await readFile(path.join(repoRoot, 'Dockerfile'), 'utf8');
  const lines = text.split('\n').map((l) => l.trim()).filter((l) => l !== '' && !l.startsWith('#'));
  const stages = lines.filter((l) => /^FROM /i.test(l)).map((l) => /\bAS\s+(\S+)/i.exec(l)?.[1]);
  assert.ok(stages.length >= 2 && stages.every((s) => s !== undefined), 'named stages');
  const final = lines.slice(lines.findLastIndex((l) => /^FROM /i.test(l)));
  assert.ok(final.some((l) => /^RUN .*npm ci .*--omit=dev/.test(l)), 'the runtime stage installs production dependencies only');
  const user = final.filter((l) => /^USER /.test(l)).at(-1);
  assert.ok(user !== undefined && !/^USER (root|0)\b/.test(user), 'it runs as a non-root user');
  for (const line of lines.filter((l) => /^COPY /.test(l))) {
    const from = /--from=(\S+)/.exec(line)?.[1];
    const parts = line.replace(/--\S+/g, '').split(/\s+/).slice(1, -1);
    if (from !== undefined) {
      assert.ok(stages.includes(from), `${line}: stage ${from} exists`);
      continue;
    }
    for (const source of parts) await access(path.join(repoRoot, source)).catch(() => assert.fail(`${line}: ${source} exists in the repository`));
  }
  const entry = JSON.parse(/^ENTRYPOINT (.*)$/m.exec(text)?.[1] ?? '[]') as string[];
  const pkg = JSON.parse(await readFile(path.join(repoRoot, 'package.json'), 'utf8')) as { bin: Record<string, string>; scripts: Record<string, string> };
  assert.equal(`./${entry[1]}`, pkg.bin.spillway, 'the entrypoint is the spillway binary');
  assert.ok(lines.some((l) => /^RUN npm run build$/.test(l)) && pkg.scripts.build !== undefined, 'it builds with the package\'s build script');
  const ignored = (await readFile(path.join(repoRoot, '.dockerignore'), 'utf8')).split('\n');
  assert.ok(ignored.includes('node_modules') && ignored.includes('dist'), '.dockerignore keeps local builds out of the context');
});
