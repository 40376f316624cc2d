# A PostgreSQL server for the tests' testcontainers path on machines where no registry serves
# postgres images: Debian bookworm's postgresql-15 on the Debian base (tools/chart/base-image.sh).
# Trust authentication, no fsync: a throwaway test server, never a production one.
# Built by tools/scripts/test-images.sh.
ARG BASE_IMAGE=webcodex/base:bookworm
FROM ${BASE_IMAGE}
RUN apt-get update \
 && apt-get install -y --no-install-recommends postgresql-15 \
 && rm -rf /var/lib/apt/lists/* \
 && install -d -o postgres -g postgres -m 0700 /var/lib/postgresql/data \
 && install -d -o postgres -g postgres -m 2775 /var/run/postgresql
ENV PATH=/usr/lib/postgresql/15/bin:$PATH \
    PGDATA=/var/lib/postgresql/data
USER postgres
# The cluster is made at build time (initdb takes seconds on a loaded machine; a test starts
# many servers): user postgres, trust authentication, databases postgres and test.
RUN initdb -U postgres --auth=trust -E UTF8 >/dev/null \
 && echo "host all all all trust" >> "$PGDATA/pg_hba.conf" \
 && echo "CREATE DATABASE test" | postgres --single -D "$PGDATA" postgres >/dev/null
# $POSTGRES_DB, when it is another database, is made at start; then the server in the foreground.
CMD ["sh", "-ec", "case \"${POSTGRES_DB:-test}\" in postgres|test) ;; *) echo \"CREATE DATABASE ${POSTGRES_DB}\" | postgres --single -D \"$PGDATA\" postgres >/dev/null ;; esac; exec postgres -c listen_addresses='*' -c fsync=off -c synchronous_commit=off -c full_page_writes=off -c max_connections=300"]
EXPOSE 5432
