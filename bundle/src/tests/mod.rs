//! Behaviour tests for bundle ingestion; every archive is built here, byte by byte.

mod attacks;
mod fuzz;
mod happy;
mod limits;
mod props;
mod support;
