//! `embed_migrations!` reads the migration folders while this crate compiles; cargo
//! would not otherwise notice a migration added or edited there and would keep the
//! old set in the binary.
fn main() {
    println!("cargo:rerun-if-changed=migrations");
}
