public enum ExamplesPlaceholder {}
