//! ${env:NAME}, ${env:NAME:-default}, ${NAME} and $$ expansion.
