//! Skeleton: filled by a later issue.
