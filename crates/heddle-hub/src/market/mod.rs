//! The marketplace: prices, budgets, priorities. What a caller asks of the
//! hub beyond the A2A request itself travels in the request's or the
//! message's metadata under one extension key ([`options::MARKET_EXT`]);
//! the hub reads it here, and the agents' pricing and limits come from
//! their manifests.

pub mod options;
