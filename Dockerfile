# Spillway's container image: `spillway` as the entrypoint (scheduler, worker...), run as the
# unprivileged `node` user. Build: docker build -t spillway .   (docs/deploy.md)

# ---- build: compile TypeScript to dist/ ------------------------------------------------
FROM node:22-bookworm-slim AS build
WORKDIR /app
COPY package.json package-lock.json ./
# Scripts stay off until the sources are here: `prepare` builds, and needs them.
RUN npm ci --no-audit --no-fund --ignore-scripts
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build

# ---- runtime: production dependencies and the compiled code only ------------------------
FROM node:22-bookworm-slim AS runtime
ENV NODE_ENV=production
WORKDIR /app
COPY package.json package-lock.json ./
# --ignore-scripts: `prepare` would run the TypeScript compiler, a dev dependency; the
# native modules come as prebuilt platform packages and need no install script.
RUN npm ci --omit=dev --no-audit --no-fund --ignore-scripts && npm cache clean --force
COPY --from=build /app/dist ./dist
COPY static ./static
# Spill files go here (mount an emptyDir or a volume: docs/deploy.md#spill-disk).
RUN mkdir -p /spill && chown node:node /spill
USER node
# Scheduler: control 8786, HTTP 8787. Worker: data 7000, HTTP 8788.
EXPOSE 8786 8787 7000 8788
ENTRYPOINT ["node", "dist/cli/main.js"]
CMD ["--help"]
