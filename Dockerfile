# Image for the Helm chart: the binary `make build` produces (static,
# CGO_ENABLED=0), on a distroless non-root base.
#   make build && docker build -t otelcol-cost:0.1.0 .
# (No Docker engine exists on the project's build machines; this file is not
# exercised by `make test`.)
FROM gcr.io/distroless/static-debian12:nonroot
COPY bin/otelcol-cost /otelcol-cost
USER 10001:10001
EXPOSE 4317 4318 8888 13133
ENTRYPOINT ["/otelcol-cost"]
CMD ["--config", "/conf/config.yaml"]
