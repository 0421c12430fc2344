# Berth's own images, berth-api and berth-operator (docs/images.md): one build stage installs the
# production dependencies (a second one prunes what only the API uses), two final targets add each
# process's code to them.
# Two more targets: berth-builder, the program of the build Jobs (git, buildctl, Node.js and
# operator/builder/ alone, no node_modules), and berth-python and berth-go, the base images that
# detected Python and Go apps are built on (docs/builds.md).
# Build context: the repository root (.dockerignore keeps local state, node_modules, .git and tests
# out). `node hack/berth-images.ts build --registry "$BERTH_REGISTRY"` runs, per target:
#
#   buildctl --addr "$BERTH_BUILDKIT_ADDR" build --frontend dockerfile.v0 \
#     --local context=. --local dockerfile=. --opt target=berth-api \
#     --opt build-arg:BASE="$BERTH_REGISTRY/berth/node:v1" \
#     --local npm=<npm's package directory> --opt context:npm=local:npm \
#     --local guard-model=<node hack/guard-model.ts> --opt context:guard-model=local:guard-model \
#     --local console=<node hack/console.ts --out .local/console-image> --opt context:console=local:console \
#     --secret id=npm-ca,src="$NODE_EXTRA_CA_CERTS" \
#     --output type=image,name="$BERTH_REGISTRY/berth/berth-api:<tag>",push=true,registry.insecure=true
#
# The base is the local berth/node (Node.js 24, user 10001, no npm), so npm comes from the named
# build context `npm` (the npm package, pinned and cached by hack/berth-images.ts) and is mounted
# only while npm runs (onnxruntime-node's binaries for other systems are dropped there). The
# CA bundle, when the machine's TLS needs one, is a build secret: neither it nor npm's cache ends
# up in a layer.
ARG BASE=127.0.0.1:5000/berth/node:v1
ARG DEBIAN=127.0.0.1:5000/berth/debian:v1

FROM ${BASE} AS deps
ARG TARGETARCH
USER root
WORKDIR /app
COPY package.json package-lock.json ./
RUN --mount=type=bind,from=npm,target=/opt/npm \
    --mount=type=cache,id=berth-npm-cache,target=/root/.npm,sharing=locked \
    --mount=type=secret,id=npm-ca,target=/run/secrets/npm-ca \
    if [ -s /run/secrets/npm-ca ]; then export NODE_EXTRA_CA_CERTS=/run/secrets/npm-ca; fi; \
    node /opt/npm/bin/npm-cli.js ci --omit=dev --ignore-scripts --no-audit --no-fund --loglevel=error && \
    ort=node_modules/onnxruntime-node/bin/napi-v6 && keep=$([ "$TARGETARCH" = arm64 ] && echo arm64 || echo x64) && \
    rm -rf "$ort/darwin" "$ort/win32" && find "$ort/linux" -mindepth 1 -maxdepth 1 ! -name "$keep" -exec rm -rf {} + && \
    test -d "$ort/linux/$keep"

# The operator's: the same less the guard classifier's runtime (onnxruntime-node) and what only it
# depends on, pruned by npm from the lock (offline: npm ci has just filled the cache).
FROM deps AS deps-operator
RUN --mount=type=bind,from=npm,target=/opt/npm \
    --mount=type=cache,id=berth-npm-cache,target=/root/.npm,sharing=locked \
    node /opt/npm/bin/npm-cli.js uninstall onnxruntime-node --no-save --omit=dev --offline --ignore-scripts --no-audit --no-fund --loglevel=error && \
    test ! -e node_modules/onnxruntime-node && test ! -e node_modules/onnxruntime-common

# What each process runs on: its production node_modules, the package manifest ("type": "module"),
# the shared libraries (kube/, crds/; the API also the toolkit's sources), then its own code. Owned
# by root: the code cannot be changed by the process that runs it (berth/node's user is 10001, and
# BuildKit creates a WORKDIR as the current USER: root here, the process's user only at the end).
FROM ${BASE} AS berth-operator
USER root
WORKDIR /app
ENV NODE_ENV=production
COPY --from=deps-operator /app/node_modules ./node_modules
COPY package.json ./
COPY crds ./crds
COPY kube ./kube
COPY operator ./operator
USER 10001:10001
ENTRYPOINT ["node", "operator/main.ts"]

FROM ${BASE} AS berth-api
USER root
WORKDIR /app
ENV NODE_ENV=production
COPY --from=deps /app/node_modules ./node_modules
COPY package.json ./
COPY toolkit/package.json ./toolkit/
COPY toolkit/src ./toolkit/src
COPY crds ./crds
COPY kube ./kube
COPY api ./api
# the prompt-injection classifier (docs/guards.md): the named context `guard-model`, the directory
# hack/guard-model.ts builds (model.onnx, vocab.txt, model.json)
COPY --from=guard-model model.onnx vocab.txt model.json ./guard-model/
ENV BERTH_GUARD_MODEL_DIR=/app/guard-model
# the console (docs/console.md): the named context `console`, the static files hack/console.ts
# builds from api/console/web, served by the API under /console
COPY --from=console . ./console/
ENV BERTH_CONSOLE_DIR=/app/console
USER 10001:10001
EXPOSE 8080
ENTRYPOINT ["node", "api/main.ts"]

# Debian packages for the images below: RUN steps reach the machine's apt mirror (berth/debian's
# sources) through the host's network; the lists and apt's caches stay out of the layers.
FROM ${BASE} AS builder-tools
USER root
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends git ca-certificates >/dev/null && \
    rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt /var/log/dpkg.log /var/cache/debconf/*-old

# The build Jobs' program (operator/builder/main.ts): git (Debian's), buildctl (hack/binaries' build of
# BuildKit's client, the named build context `buildctl`: hack/berth-images.ts passes a directory
# holding only that binary), Node.js from berth/node, and the program, which needs no npm package.
# The image also carries the builds' egress proxy (operator/builder/egress.ts, with the address
# policy it shares with the API), run beside buildkitd as its HTTP(S)_PROXY (docs/builds.md).
# It runs as 10001 and writes only to /workspace (its own, in the container's writable layer, which
# the Job bounds by ephemeral storage) and /tmp; buildkitd is a separate daemon (BUILDKIT_HOST).
# Node.js's compile cache (its modules with their types stripped, and V8's code for them) is filled
# here, as 10001 (the cache is kept per user): loading the program then costs a quarter of the CPU,
# which ten builds starting at once on a small node feel (docs/builds.md).
FROM builder-tools AS berth-builder
COPY --from=buildctl buildctl /usr/local/bin/buildctl
WORKDIR /app
COPY package.json ./
COPY operator/builder ./operator/builder
COPY kube/addresses.ts ./kube/addresses.ts
RUN install -d -o 10001 -g 10001 /app/compile-cache /workspace && chmod 1777 /tmp
USER 10001:10001
ENV NODE_COMPILE_CACHE=/app/compile-cache
RUN node --input-type=module -e "await import('/app/operator/builder/main.ts')" && test -n "$(ls -A /app/compile-cache)"
WORKDIR /workspace
ENTRYPOINT ["node", "/app/operator/builder/main.ts"]

# The Python base image of detected Python apps: berth/debian + Debian's Python 3 with venv and pip
# (`python` is python3), user and group `python`, 10001. No compiler: packages with C extensions
# install from wheels only.
FROM ${DEBIAN} AS berth-python
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends python3 python3-venv python3-pip python-is-python3 ca-certificates >/dev/null && \
    rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt /var/log/dpkg.log /var/cache/debconf/*-old && \
    groupadd --gid 10001 python && useradd --uid 10001 --gid 10001 --home-dir /home/python --create-home --shell /usr/sbin/nologin python
ENV PYTHONUNBUFFERED=1
USER 10001:10001
CMD ["python3"]

# The Go base image of detected Go apps: berth/debian + this machine's Go toolchain (the named build
# context `go`: hack/berth-images.ts passes `go env GOROOT`, and Go's version is in the image's
# tag) at /usr/local/go without its tests and documentation, CA certificates for module downloads,
# user and group `go`, 10001. GOTOOLCHAIN is local, as in the official golang images: a go.mod that
# asks for a newer Go fails its build with Go's own message instead of fetching another toolchain.
FROM ${DEBIAN} AS berth-go
RUN apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends ca-certificates >/dev/null && \
    rm -rf /var/lib/apt/lists/* /var/cache/apt/*.bin /var/log/apt /var/log/dpkg.log /var/cache/debconf/*-old && \
    groupadd --gid 10001 go && useradd --uid 10001 --gid 10001 --home-dir /home/go --create-home --shell /usr/sbin/nologin go
COPY --from=go bin /usr/local/go/bin
COPY --from=go pkg /usr/local/go/pkg
COPY --from=go src /usr/local/go/src
COPY --from=go lib /usr/local/go/lib
COPY --from=go go.env VERSION /usr/local/go/
ENV PATH=/usr/local/go/bin:$PATH GOTOOLCHAIN=local
USER 10001:10001
CMD ["go", "version"]
