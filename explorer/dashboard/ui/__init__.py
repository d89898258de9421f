"""What every tab's view shares: the palette and type sizes, the one heatmap figure, the header, and the base view."""
